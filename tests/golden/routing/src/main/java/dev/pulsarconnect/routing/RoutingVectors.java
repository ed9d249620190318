package dev.pulsarconnect.routing;

import com.google.common.hash.Hashing;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.function.ToIntBiFunction;
import org.apache.pulsar.client.impl.Hash;
import org.apache.pulsar.client.impl.JavaStringHash;
import org.apache.pulsar.client.impl.Murmur3Hash32;
import org.apache.pulsar.client.util.MathUtils;

/**
 * Prints routing vectors as JSON: for every key and every partition count 1..16, the partition chosen by
 *
 * <ul>
 *   <li>{@code key_hash}: the Flink Pulsar connector's {@code KeyHashMessageRouterImpl}:
 *       {@code Math.abs(murmur3_32(keyBytes)) % n} (Guava murmur3_32, seed 0, over the raw key bytes);
 *   <li>{@code java_default}: the Java client's default routing of a keyed message
 *       ({@code RoundRobinPartitionMessageRouterImpl} with the default {@code JavaStringHash} scheme):
 *       {@code signSafeMod(JavaStringHash.makeHash(key), n)};
 *   <li>{@code java_murmur3}: the same with {@code HashingScheme.Murmur3_32Hash}.
 * </ul>
 *
 * Keys are given as base64 of their UTF-8 bytes. Deterministic: the same output on every run.
 */
public final class RoutingVectors {
  private RoutingVectors() {}

  public static void main(String[] args) {
    List<String> keys = keys();
    Hash javaHash = JavaStringHash.getInstance();
    Hash murmur = Murmur3Hash32.getInstance();
    StringBuilder out = new StringBuilder("{\n  \"keys_base64\": [");
    for (int i = 0; i < keys.size(); i++) {
      out.append(i > 0 ? "," : "").append('"');
      out.append(Base64.getEncoder().encodeToString(keys.get(i).getBytes(StandardCharsets.UTF_8))).append('"');
    }
    out.append("],\n  \"partitions\": {");
    for (int n = 1; n <= 16; n++) {
      out.append(n > 1 ? "," : "").append("\n    \"").append(n).append("\": {");
      // Java's Math.abs(Integer.MIN_VALUE) stays negative: the vectors record what the connector computes.
      append(out, "key_hash", keys, n,
          (k, parts) -> Math.abs(Hashing.murmur3_32_fixed(0).hashBytes(k.getBytes(StandardCharsets.UTF_8)).asInt()) % parts);
      out.append(", ");
      append(out, "java_default", keys, n, (k, parts) -> MathUtils.signSafeMod(javaHash.makeHash(k), parts));
      out.append(", ");
      append(out, "java_murmur3", keys, n, (k, parts) -> MathUtils.signSafeMod(murmur.makeHash(k), parts));
      out.append('}');
    }
    out.append("\n  }\n}\n");
    System.out.print(out);
  }

  private static List<String> keys() {
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < 9_950; i++) {
      keys.add("key-" + i);
    }
    String[] special = {
      "", "a", "k1", "key1", "hello", "user-42", "ünïcødé", "日本語のキー", "🔑emoji", "with space", "comma,semi;colon",
      "\u0000nul", "line\nbreak", "tab\tkey", "quote\"key", "very-long-" + "x".repeat(300), "MiXeD-CaSe", "0", "-1",
      "2147483648", "customer-1", "customer-2", "order-7", "ÄÖÜ", "ß", "русский", "עברית", "العربية", "한국어", "中文",
      "🙂🙃", "\\backslash", "/slash", "..", "null", "NULL", "true", "false", "1.5e10", "key-00", "key-000", "KEY-1",
      "Key-1", " key-1", "key-1 ", "a".repeat(64), "b".repeat(65), "c".repeat(1024), "\u00e9", "e\u0301"
    };
    for (String s : special) {
      keys.add(s);
    }
    return keys;
  }

  private static void append(StringBuilder out, String name, List<String> keys, int n, ToIntBiFunction<String, Integer> route) {
    out.append('"').append(name).append("\": [");
    for (int i = 0; i < keys.size(); i++) {
      out.append(i > 0 ? "," : "").append(route.applyAsInt(keys.get(i), n));
    }
    out.append(']');
  }
}
