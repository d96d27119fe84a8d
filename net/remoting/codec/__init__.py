"""Sans-IO RocketMQ remoting codec: frames, headers, codes, batch bodies."""

from rokka.net.remoting.codec.batch import BatchElement, BatchFormatError, decode_batch, encode_batch
from rokka.net.remoting.codec.codes import (
    DEFAULT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    REMARK_SYSTEM_BUSY,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    LanguageCode,
    RequestCode,
    ResponseCode,
    remark_not_supported,
)
from rokka.net.remoting.codec.errors import (
    HeaderFieldError,
    LocalProtocolError,
    RemoteProtocolError,
    RemotingProtocolError,
)
from rokka.net.remoting.codec.headers import Header, normalize_send_header, to_ext
from rokka.net.remoting.codec.remoting import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    RemotingCommand,
    decode_frame,
    encode_command,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES", "DEFAULT_VERSION", "FLAG_ONEWAY", "FLAG_RESPONSE", "REMARK_SYSTEM_BUSY",
    "SERIALIZE_JSON", "SERIALIZE_ROCKETMQ", "BatchElement", "BatchFormatError", "FrameDecoder", "Header",
    "HeaderFieldError", "LanguageCode", "LocalProtocolError", "RemoteProtocolError", "RemotingCommand",
    "RemotingProtocolError", "RequestCode", "ResponseCode", "decode_batch", "decode_frame",
    "encode_batch", "encode_command", "normalize_send_header", "remark_not_supported", "to_ext",
]
