package sncheck;

import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.stream.Stream;

/**
 * Plans job files with Flink 1.13.6 and StreamNative's connector: every statement but the last INSERT is
 * executed, the INSERT is explained (which creates the table sources and sinks through their factories).
 * Prints `file TAB ok` or `file TAB refused TAB message chain` per job file of the directory args[0].
 */
public class SnCheck {
    public static void main(String[] args) throws Exception {
        try (Stream<Path> files = Files.list(Paths.get(args[0]))) {
            for (Path f : (Iterable<Path>) files.sorted()::iterator) {
                String sql = new String(Files.readAllBytes(f), StandardCharsets.UTF_8);
                String[] statements = sql.split(";\\s*\\n");
                TableEnvironment env = TableEnvironment.create(
                        EnvironmentSettings.newInstance().useBlinkPlanner().inStreamingMode().build());
                String name = f.getFileName().toString();
                try {
                    for (String s : statements) {
                        String st = s.trim();
                        if (st.isEmpty()) {
                            continue;
                        }
                        if (st.toUpperCase().startsWith("INSERT")) {
                            env.explainSql(st);
                        } else {
                            env.executeSql(st);
                        }
                    }
                    System.out.println(name + "\tok");
                } catch (Throwable e) {
                    StringBuilder msg = new StringBuilder();
                    for (Throwable c = e; c != null; c = c.getCause()) {
                        msg.append(" | ").append(String.valueOf(c.getMessage()).replace('\n', ' '));
                    }
                    System.out.println(name + "\trefused\t" + msg);
                }
            }
        }
    }
}
