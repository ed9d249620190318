// Interop driver for the official Apache Pulsar Java client (pulsar-client-original, the broker's own
// classpath), run as a single-file program: `java -cp <broker classpath> KeyBytesInterop.java ...`.
//
//   produce SERVICE_URL COUNT TOPIC=CODEC...
//       Writes COUNT messages to each TOPIC through a batching producer compressing with CODEC (a
//       CompressionType name), each with a key set as bytes (`keyBytes`, not valid UTF-8) and a property.
//   consume SERVICE_URL COUNT TOPIC...
//       Reads COUNT messages of each TOPIC from the earliest position and prints, per message, the topic,
//       the payload, the key as text (`getKey`), as bytes (`getKeyBytes`), whether it is flagged base64
//       and the batch index.
//
// Results are `@@`-prefixed JSON lines; bytes are base64.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;

public final class KeyBytesInterop {
  private KeyBytesInterop() {}

  public static void main(String[] args) throws Exception {
    try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build()) {
      switch (args[0]) {
        case "produce" -> {
          int count = Integer.parseInt(args[2]);
          for (int t = 3; t < args.length; t++) {
            String[] spec = args[t].split("=", 2);
            produce(client, spec[0], CompressionType.valueOf(spec[1]), count);
          }
        }
        case "consume" -> {
          int count = Integer.parseInt(args[2]);
          for (int t = 3; t < args.length; t++) {
            consume(client, args[t], count);
          }
        }
        default -> throw new IllegalArgumentException("unknown command " + args[0]);
      }
    }
  }

  /** The key of message {@code i}: four bytes that are not UTF-8. */
  static byte[] key(int i) {
    return new byte[] {(byte) 0xff, 0, (byte) i, (byte) 0x80};
  }

  static String b64(byte[] bytes) {
    return Base64.getEncoder().encodeToString(bytes);
  }

  static void emit(String json) {
    System.out.println("@@" + json);
    System.out.flush();
  }

  static void produce(PulsarClient client, String topic, CompressionType codec, int count)
      throws Exception {
    try (Producer<byte[]> producer =
        client
            .newProducer()
            .topic(topic)
            .compressionType(codec)
            .enableBatching(true)
            .batchingMaxMessages(20)
            .batchingMaxPublishDelay(20, TimeUnit.MILLISECONDS)
            .create()) {
      List<CompletableFuture<MessageId>> sent = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        sent.add(
            producer
                .newMessage()
                .keyBytes(key(i))
                .value(("java-" + codec + "-" + i).getBytes(StandardCharsets.UTF_8))
                .property("index", Integer.toString(i))
                .sendAsync());
      }
      producer.flush();
      for (int i = 0; i < count; i++) {
        MessageId id = sent.get(i).get(30, TimeUnit.SECONDS);
        emit(
            "{\"topic\":\"" + topic + "\",\"index\":" + i + ",\"key_bytes\":\"" + b64(key(i))
                + "\",\"batch_index\":" + batchIndex(id) + "}");
      }
    }
  }

  static void consume(PulsarClient client, String topic, int count) throws Exception {
    try (Consumer<byte[]> consumer =
        client
            .newConsumer()
            .topic(topic)
            .subscriptionName("java-interop")
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
            .subscribe()) {
      for (int i = 0; i < count; i++) {
        Message<byte[]> m = consumer.receive(30, TimeUnit.SECONDS);
        if (m == null) {
          throw new IllegalStateException("only " + i + " of " + count + " messages");
        }
        emit(
            "{\"topic\":\"" + topic + "\",\"payload\":\"" + b64(m.getData()) + "\",\"key\":\""
                + (m.hasKey() ? b64(m.getKey().getBytes(StandardCharsets.UTF_8)) : "")
                + "\",\"key_bytes\":\"" + (m.hasKey() ? b64(m.getKeyBytes()) : "")
                + "\",\"b64\":" + m.hasBase64EncodedKey()
                + ",\"batch_index\":" + batchIndex(m.getMessageId()) + "}");
        consumer.acknowledge(m);
      }
    }
  }

  static int batchIndex(MessageId id) {
    return id instanceof MessageIdAdv adv ? adv.getBatchIndex() : -1;
  }
}
