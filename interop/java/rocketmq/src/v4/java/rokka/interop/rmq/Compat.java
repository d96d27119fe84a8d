package rokka.interop.rmq;

import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.body.ConsumerConnection;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/** The few admin calls whose classes moved packages between the 4.9 and 5.x lines (v4 build). */
final class Compat {
    private Compat() {
    }

    static List<String> masterAddrs(DefaultMQAdminExt admin) throws Exception {
        ClusterInfo info = admin.examineBrokerClusterInfo();
        List<String> out = new ArrayList<>();
        for (BrokerData bd : info.getBrokerAddrTable().values()) {
            out.add(bd.selectBrokerAddr());
        }
        return out;
    }

    static int routeQueues(DefaultMQAdminExt admin, String topic) throws Exception {
        TopicRouteData route = admin.examineTopicRouteInfo(topic);
        return route.getQueueDatas().size();
    }

    static int consumerConnections(DefaultMQAdminExt admin, String group) throws Exception {
        ConsumerConnection cc = admin.examineConsumerConnectionInfo(group);
        return cc.getConnectionSet().size();
    }

    static void broadcasting(org.apache.rocketmq.client.consumer.DefaultMQPushConsumer c) {
        c.setMessageModel(MessageModel.BROADCASTING);
    }
}
