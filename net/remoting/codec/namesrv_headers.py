"""The name server's RocketMQ request headers (Java's ``namesrv/*RequestHeader`` classes).

Theory of operation
-------------------
Declarations as in ``request_headers`` (see ``header_decl``): the client
(``client/namesrv.py``, ``client/admin.py``) encodes its name server requests
from them, and the name server's handlers (``gateway/namesrv/handlers.py``)
decode from the same ones and encode their response headers with the
``*ResponseHeader`` declarations.  Required fields follow RocketMQ 4.9's
``@CFNotNull`` and rokka's name server.  ``BY_CODE`` maps request codes to their
request declaration.
"""

from __future__ import annotations

from rokka.net.remoting.codec.codes import RequestCode as RC
from rokka.net.remoting.codec.header_decl import I32, I64, RequestHeader, ResponseHeader, declare, java


@declare
class RegisterBrokerRequestHeader(RequestHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: I64
    compressed: bool = False
    body_crc32: I32 = 0


@declare
class UnRegisterBrokerRequestHeader(RequestHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: I64


@declare
class QueryDataVersionRequestHeader(RequestHeader):
    """Java also declares brokerName, clusterName, brokerId (all @CFNotNull); rokka reads the address only."""

    broker_addr: str


@declare
class GetRouteInfoRequestHeader(RequestHeader):
    topic: str
    accept_standard_json_only: bool | None = None


@declare
class GetTopicsByClusterRequestHeader(RequestHeader):
    cluster: str


@declare
class DeleteTopicFromNamesrvRequestHeader(RequestHeader):
    topic: str
    cluster_name: str | None = java(empty_is_none=True)


@declare
class BrokerNameRequestHeader(RequestHeader):
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER (Java: one class each, ``brokerName``)."""

    broker_name: str


@declare
class PutKVConfigRequestHeader(RequestHeader):
    namespace: str
    key: str
    value: str


@declare
class KVConfigRequestHeader(RequestHeader):
    """GET_KV_CONFIG and DELETE_KV_CONFIG (Java: GetKVConfigRequestHeader, DeleteKVConfigRequestHeader)."""

    namespace: str
    key: str


@declare
class GetKVListByNamespaceRequestHeader(RequestHeader):
    namespace: str


# -- response headers (the name server's answers; same machinery, Java's *ResponseHeader classes) --------------


@declare
class RegisterBrokerResponseHeader(ResponseHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@declare
class QueryDataVersionResponseHeader(ResponseHeader):
    changed: bool


@declare
class WipeWritePermOfBrokerResponseHeader(ResponseHeader):
    wipe_topic_count: I32


@declare
class AddWritePermOfBrokerResponseHeader(ResponseHeader):
    add_topic_count: I32


BY_CODE: dict[int, type[RequestHeader]] = {
    RC.REGISTER_BROKER: RegisterBrokerRequestHeader, RC.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    RC.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RC.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader, RC.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
    RC.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    RC.WIPE_WRITE_PERM_OF_BROKER: BrokerNameRequestHeader, RC.ADD_WRITE_PERM_OF_BROKER: BrokerNameRequestHeader,
    RC.PUT_KV_CONFIG: PutKVConfigRequestHeader, RC.GET_KV_CONFIG: KVConfigRequestHeader,
    RC.DELETE_KV_CONFIG: KVConfigRequestHeader, RC.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
}
