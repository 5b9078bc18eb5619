import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiKeys;
import java.util.TreeSet;

public class ListApis {
    public static void main(String[] args) {
        for (ApiKeys key : ApiKeys.values()) {
            TreeSet<String> listeners = new TreeSet<>();
            for (ApiMessageType.ListenerType t : key.messageType.listeners()) listeners.add(t.name());
            System.out.println(key.id + "\t" + key.name + "\t" + key.oldestVersion() + "\t"
                + key.latestVersion() + "\t" + String.join(",", listeners));
        }
    }
}
