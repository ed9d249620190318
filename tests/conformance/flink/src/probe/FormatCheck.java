package probe;

import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

/**
 * Plans each case with Flink: `name TAB source|sink TAB columns TAB options` per line; prints
 * `name TAB ok` or `name TAB refused TAB message chain`.
 */
public class FormatCheck {
    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(args[0]));
        for (String line : lines) {
            String[] p = line.split("\t", -1);
            String name = p[0];
            TableEnvironment env = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
            try {
                env.executeSql("CREATE TABLE t (" + p[2] + ") WITH ('connector' = 'probe', " + p[3] + ")");
                if (p[1].equals("source")) {
                    env.explainSql("SELECT * FROM t");
                } else {
                    env.executeSql("CREATE TABLE g WITH ('connector' = 'datagen') LIKE t (EXCLUDING ALL)");
                    env.explainSql("INSERT INTO t SELECT * FROM g");
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
