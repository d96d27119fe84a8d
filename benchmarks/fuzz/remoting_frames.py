"""RocketMQ remoting frames for the fuzzer: broker and name-server requests, valid and hostile.

Theory of operation
-------------------
A remoting frame is ``int32 total | int32 (serializeType << 24 | headerLength) | header | body``; the
header is JSON (type 0) or RocketMQ's binary form (type 1).  ``RemotingFrames(role=...)`` knows, per
request code of that role (``BROKER_CODES`` / ``NAMESRV_CODES``), which extFields and which body a real
client sends (RocketMQ 4.9's request headers), fills them with plausible values or -- per switched-on family
(``hostile.FAMILIES``) -- hostile ones: names (pool / over-long / reserved / odd bytes / vetted traversal),
numbers as strings ("2147483648", "1e400", "abc"), both ``topic`` and ``b`` on SEND_MESSAGE_V2, sysFlag-
compressed bodies that inflate to ``bomb_bytes`` (zlib, and RocketMQ 5's lz4/zstd/zlib type bits), deep /
overflowing JSON headers and bodies (``"code":1e400``, 10,000-deep arrays), length lies, then byte
mutations.  Codes of the other role and unknown codes are sent now and then as well.

The name-server requests that legitimately re-route traffic (REGISTER/UNREGISTER_BROKER,
WIPE_WRITE_PERM_OF_BROKER) only ever name fake brokers (``fz-broker-N``): the steady clients' broker and
topics are never named, so what the fuzz breaks is the server's robustness, not RocketMQ's design (it has
no name-server authentication; issue 19 item 9).
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.fuzz import hostile
from benchmarks.fuzz.mutate import mutate_bytes

Ext = dict[str, Any]

BROKER_CODES = (10, 310, 320, 11, 14, 15, 17, 215, 29, 30, 31, 32, 33, 12, 34, 35, 36, 37, 38, 41, 42, 200, 207,
                21, 28, 201, 202, 208, 203, 204, 222, 13, 43, 45, 22, 23, 26)
NAMESRV_CODES = (103, 104, 105, 106, 205, 206, 216, 100, 101, 102, 219, 224, 322, 327, 304, 311)
UNKNOWN_CODES = (-1, 0, 9999, 32767, 2**31 - 1, 25, 318, 50, 51, 27, 329, 306, 316)
SYSFLAG_BOMBS = ((1, "zlib"), (1 | 3 << 8, "zlib"), (1 | 1 << 8, "lz4"), (1 | 2 << 8, "zstd"))
PROPS_HOSTILE = ("DELAY\x01999999\x02", "DELAY\x01-1\x02", "TRAN_MSG\x01true\x02", "__STARTDELIVERTIME\x01" + "9" * 30,
                 "TIMER_DELAY_SEC\x011e400\x02", "KEYS\x01" + "k" * 40000 + "\x02", "\x01\x02\x01\x02", "x" * 70000,
                 "REAL_TOPIC\x01%s\x02", "MAX_OFFSET\x01-5\x02", "UNIQ_KEY\x01\x02", "WAIT\x01maybe\x02")


@dataclass
class RemotingFrames(hostile.FrameSource):
    h: hostile.Hostile
    role: str = "broker"
    bomb_bytes: int = 64 << 20
    opaque: int = 0

    def frame(self) -> tuple[bytes, str]:
        r, h = self.rng, self.h
        if self.start_frame():
            return self.length_lie(), "length-lie"
        if h.on("json") and r.random() < 0.06:
            return self.json_bomb(), "json-hostile"
        codes = BROKER_CODES if self.role == "broker" else NAMESRV_CODES
        roll = r.random()
        code = r.choice(codes) if roll < 0.93 else r.choice(UNKNOWN_CODES + (BROKER_CODES if self.role != "broker"
                                                                             else NAMESRV_CODES))
        if code in (25, 318) and self.role == "broker" or code == 318:
            code = 9999  # UPDATE_BROKER/NAMESRV_CONFIG could point the store anywhere: never sent
        self._risky = False
        ext, body = self.request(code)
        frame = self.encode(code, ext, body, binary=r.random() < 0.1)
        label = f"code {code}"
        if h.on("mutate") and not self._risky and r.random() < 0.25 and hostile.frame_is_slash_free(frame):
            mutated = mutate_bytes(r, frame, length_offsets=(0, 4))
            if hostile.frame_is_slash_free(mutated):
                return mutated, label + " mutated"
        return frame, label

    # ----- encoding
    def encode(self, code: int, ext: Ext, body: bytes, binary: bool = False, header: bytes | None = None) -> bytes:
        self.opaque = (self.opaque + 1) & 0x7FFFFFFF
        if header is None:
            header = self.binary_header(code, ext) if binary else self.json_header(code, ext)
        stype = 1 if binary else 0
        return struct.pack(">ii", 4 + len(header) + len(body), stype << 24 | len(header)) + header + body

    def json_header(self, code: int, ext: Ext) -> bytes:
        head = {"code": code, "flag": 0, "language": "JAVA", "opaque": self.opaque,
                "serializeTypeCurrentRPC": "JSON", "version": 407}
        if ext:
            head["extFields"] = {k: v if isinstance(v, str) else str(v) for k, v in ext.items()}
        return json.dumps(head, ensure_ascii=self.rng.random() < 0.5).encode("utf-8", "surrogatepass")

    def binary_header(self, code: int, ext: Ext) -> bytes:
        out = bytearray(struct.pack(">hbhii", max(-32768, min(32767, code)), 0, 407, self.opaque, 0))
        out += struct.pack(">i", 0)  # no remark
        fields = bytearray()
        for k, v in ext.items():
            kb, vb = k.encode(), str(v).encode("utf-8", "surrogatepass")
            fields += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
        return bytes(out + struct.pack(">i", len(fields)) + fields)

    def length_lie(self) -> bytes:
        r = self.rng
        hdr = self.json_header(105, {"topic": "fz-t-0"})
        kind = r.randrange(6)
        if kind == 0:
            return struct.pack(">i", r.choice((0x7FFFFFFF, -1, -5, 0, 3, (16 << 20) + 1))) + b"\x00" * 8
        if kind == 1:  # announced just under the limit, cut short: the rest never comes
            return struct.pack(">ii", (16 << 20) - 8, len(hdr)) + hdr
        if kind == 2:  # header length larger than the frame / negative / type byte odd
            return struct.pack(">iI", 4 + len(hdr), r.choice((9999, 0xFFFFFFFF, 0x7FFFFF, 2 << 24 | len(hdr),
                                                               0xFF << 24 | len(hdr)))) + hdr
        if kind == 3:  # binary header whose remark / extFields lengths lie
            lie = struct.pack(">hbhii", 105, 0, 407, 1, 0) + struct.pack(">i", r.choice((2**31 - 1, -7, 1 << 24)))
            return struct.pack(">ii", 4 + len(lie), 1 << 24 | len(lie)) + lie
        if kind == 4:
            lie = struct.pack(">hbhii", 105, 0, 407, 1, 0) + struct.pack(">ii", 0, 100) + struct.pack(">h", 30000)
            return struct.pack(">ii", 4 + len(lie), 1 << 24 | len(lie)) + lie
        return bytes(r.randrange(256) for _ in range(r.randrange(1, 40))).replace(b"/", b"_")

    def json_bomb(self) -> bytes:
        """Headers with overflowing numbers, deep nesting, duplicate keys, bad text."""
        r, h = self.rng, self.h
        code = r.choice(BROKER_CODES if self.role == "broker" else NAMESRV_CODES)
        depth = r.choice((100, 1000, 10_000, 100_000))
        options: list[Callable[[], bytes]] = [
            lambda: b'{"code":%s,"opaque":1,"flag":0,"version":407}' % h.json_number().encode(),
            lambda: b'{"code":%d,"opaque":%s,"flag":%s}' % (code, h.json_number().encode(), h.json_number().encode()),
            lambda: b'{"code":%d,"extFields":' % code + b"[" * depth + b"]" * depth + b"}",
            lambda: b"[" * depth + b"]" * depth,
            lambda: b'{"a":' * depth + b"1" + b"}" * depth,
            lambda: b'{"code":%d,"extFields":{"topic":' % code + b'{"x":' * depth + b"1" + b"}" * depth + b"}}",
            lambda: b'{"code":10,"code":215,"opaque":1,"extFields":{"topic":"fz-t-1","topic":"fz-t-2"}}',
            lambda: b'\xef\xbb\xbf{"code":%d,"opaque":1}' % code,
            lambda: b'{"code":%d,"opaque":1} trailing' % code,
            lambda: b'{"code":%d,"opaque":1,"extFields":{"topic":"%s","b":"\xff\xfe"}}' % (
                code, b"fz-t-1" if "lone-surrogates" in h.avoid else b"\\ud800"),
            lambda: b'{"code":%d,"opaque":1,"extFields":{"topic":null,"queueId":[1],"sysFlag":{"a":1}}}' % code,
            lambda: b'{"code":%d,"opaque":1,"remark":"%s"}' % (code, b"r" * (1 << 20)),
            lambda: b'{"code":%d,"opaque":1,"extFields":{"queueId":%s}}' % (code, b"9" * 10_000),
            lambda: b'{"code":%d,"opaque":1,"language":"%s","version":%s}' % (
                code, r.choice((b"JAVA", b"", b"\x00", b"KLINGON")), h.json_number().encode()),
            lambda: b"",
            lambda: b"{" * 50_000,
        ]
        header = r.choice(options)()
        body = b"" if r.random() < 0.7 else self.deep_json_body(depth)
        return self.encode(code, {}, body, header=header)

    def deep_json_body(self, depth: int) -> bytes:
        return b'{"clientID":"fz","producerDataSet":' + b"[" * depth + b"]" * depth + b"}"

    # ----- requests
    def num(self, normal: int) -> str:
        r, h = self.rng, self.h
        if h.on("numbers") and r.random() < 0.1:
            return r.choice(("2147483648", "-1", "-2147483649", "1e400", "abc", "", "9" * 30, "0x10", " 1", "NaN",
                             str(2**63), "-0"))
        return str(normal)

    def name(self, kind: str = "topic") -> str:
        n = self.h.name(kind, 127)
        if "/" in n or "\\" in n:
            self._risky = True
        return n

    def request(self, code: int) -> tuple[Ext, bytes]:
        handler = getattr(self, f"req_{code}", None)
        if handler is not None:
            return handler()
        if code in (21, 28, 201, 106, 206, 304, 311, 43, 45, 26, 23):
            return {}, b""
        if code in (202, 22):
            return {"topic": self.name()}, b""
        if code in (208, 203, 38, 207):
            return {"consumerGroup": self.name("group"), "groupName": self.name("group"), "topic": self.name()}, b""
        if code == 204:
            return {"producerGroup": self.name("group")}, b""
        if code in (30, 31, 32, 29, 13):
            return {"topic": self.name(), "queueId": self.num(self.rng.randrange(4)), "timestamp": self.num(0)}, b""
        if code in (216, 105):
            return {"topic": self.name()}, b""
        if code in (100, 101, 102, 219):
            return {"namespace": self.name("group"), "key": self.name(), "value": self.name()}, b""
        if code in (205, 327):
            return {"brokerName": self.fake_broker()}, b""
        if code == 224:
            return {"cluster": self.name("group")}, b""
        return {"topic": self.name()}, self.rng.randbytes(self.rng.randrange(16)).replace(b"/", b"_")

    def fake_broker(self) -> str:
        return f"fz-broker-{self.rng.randrange(4)}"

    def message_body(self) -> tuple[int, bytes]:
        r, h = self.rng, self.h
        if h.on("bombs") and r.random() < (0.5 if h.focus == "bombs" else 0.1):
            flag, codec = r.choice(SYSFLAG_BOMBS)
            size = r.choice((self.bomb_bytes, self.bomb_bytes // 4, 5 << 20))
            return flag, hostile.bomb(codec, size)
        if r.random() < 0.03:
            return 1, b"not zlib at all"
        return r.choice((0, 0, 0, 4, 8, 12)) if h.on("numbers") else 0, f"fz-{r.randrange(10**6)}".encode()

    def properties(self) -> str:
        r, h = self.rng, self.h
        if h.on("names") and r.random() < 0.08:
            p = r.choice(PROPS_HOSTILE)
            return p % self.name() if "%s" in p else p
        return f"KEYS\x01k{r.randrange(100)}\x02TAGS\x01t\x02WAIT\x01true\x02"

    def send_fields(self, v2: bool) -> tuple[Ext, bytes]:
        r = self.rng
        sys_flag, body = self.message_body()
        fields = [("producerGroup", "a", self.name("group")), ("topic", "b", self.name()),
                  ("defaultTopic", "c", "TBW102"), ("defaultTopicQueueNums", "d", self.num(4)),
                  ("queueId", "e", self.num(r.randrange(4))), ("sysFlag", "f", self.num(sys_flag)),
                  ("bornTimestamp", "g", self.num(int(time.time() * 1000))), ("flag", "h", self.num(0)),
                  ("properties", "i", self.properties()), ("reconsumeTimes", "j", self.num(0)),
                  ("unitMode", "k", "false"), ("maxReconsumeTimes", "l", self.num(16)), ("batch", "m", "false")]
        ext = {(short if v2 else long): val for long, short, val in fields if r.random() > 0.03}
        if v2 and r.random() < 0.1:
            ext["topic"] = self.name()  # both ``b`` and ``topic`` (issue 19 item 4)
        return ext, body

    def req_10(self) -> tuple[Ext, bytes]:
        return self.send_fields(False)

    def req_310(self) -> tuple[Ext, bytes]:
        return self.send_fields(True)

    def req_320(self) -> tuple[Ext, bytes]:
        ext, _ = self.send_fields(True)
        ext["m"] = "true"
        out = bytearray()
        for _ in range(self.rng.randrange(1, 4)):
            body = f"fz-b-{self.rng.randrange(1000)}".encode()
            props = self.properties().encode("utf-8", "surrogatepass")[:32767]
            size = 4 * 5 + len(body) + 2 + len(props)
            if self.h.on("lengths") and self.rng.random() < 0.1:
                size = self.rng.choice((0, -1, 2**31 - 1, size + 7))
            out += struct.pack(">iiiii", size, 0, 0, 0, len(body)) + body + struct.pack(">h", len(props)) + props
        return ext, bytes(out)

    def req_11(self) -> tuple[Ext, bytes]:
        r = self.rng
        return {"consumerGroup": self.name("group"), "topic": self.name(), "queueId": self.num(r.randrange(4)),
                "queueOffset": self.num(r.randrange(10)), "maxMsgNums": self.num(32), "sysFlag": self.num(2),
                "commitOffset": self.num(0), "suspendTimeoutMillis": self.num(r.choice((0, 50))),
                "subscription": r.choice(("*", "a || b", "a" * 5000, "(((", "a > 1")),
                "subVersion": self.num(0), "expressionType": r.choice(("TAG", "SQL92", "X"))}, b""

    def req_14(self) -> tuple[Ext, bytes]:
        return {"consumerGroup": self.name("group"), "topic": self.name(), "queueId": self.num(0)}, b""

    def req_15(self) -> tuple[Ext, bytes]:
        ext, body = self.req_14()
        ext["commitOffset"] = self.num(self.rng.randrange(100))
        return ext, body

    def req_17(self) -> tuple[Ext, bytes]:
        r = self.rng
        return {"topic": self.name(), "defaultTopic": "TBW102", "readQueueNums": self.num(r.randrange(1, 5)),
                "writeQueueNums": self.num(r.randrange(1, 5)), "perm": self.num(6), "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": self.num(0), "order": "false"}, b""

    def req_215(self) -> tuple[Ext, bytes]:
        return {"topic": self.name()}, b""

    def req_33(self) -> tuple[Ext, bytes]:
        return {"offset": self.num(self.rng.randrange(10_000))}, b""

    def req_12(self) -> tuple[Ext, bytes]:
        return {"topic": self.name(), "key": "k1", "maxNum": self.num(32), "beginTimestamp": self.num(0),
                "endTimestamp": self.num(2**62)}, b""

    def req_34(self) -> tuple[Ext, bytes]:
        r = self.rng
        sub = {"topic": self.name(), "subString": "*", "classFilterMode": False, "tagsSet": [], "codeSet": [],
               "subVersion": 0, "expressionType": "TAG"}
        body = {"clientID": f"fz-client-{r.randrange(100)}",
                "producerDataSet": [{"groupName": self.name("group")}],
                "consumerDataSet": [{"groupName": self.name("group"), "consumeType": "CONSUME_PASSIVELY",
                                     "messageModel": r.choice(("CLUSTERING", "BROADCASTING", "X")),
                                     "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                     "subscriptionDataSet": [sub] * r.choice((1, 1, 2, 500)), "unitMode": False}]}
        return {}, json.dumps(body).encode("utf-8", "surrogatepass")

    def req_35(self) -> tuple[Ext, bytes]:
        return {"clientID": "fz-client-1", "producerGroup": self.name("group"),
                "consumerGroup": self.name("group")}, b""

    def req_36(self) -> tuple[Ext, bytes]:
        return {"offset": self.num(self.rng.randrange(10_000)), "group": self.name("group"),
                "delayLevel": self.num(self.rng.randrange(-1, 20)), "originMsgId": "00" * 16,
                "originTopic": self.name(), "unitMode": "false", "maxReconsumeTimes": self.num(16)}, b""

    def req_37(self) -> tuple[Ext, bytes]:
        r = self.rng
        return {"producerGroup": self.name("group"), "tranStateTableOffset": self.num(r.randrange(100)),
                "commitLogOffset": self.num(r.randrange(10_000)), "commitOrRollback": self.num(r.choice((8, 12, 0))),
                "fromTransactionCheck": "false", "msgId": "00" * 16, "transactionId": "fz"}, b""

    def req_41(self) -> tuple[Ext, bytes]:
        body = {"consumerGroup": self.name("group"), "clientId": "fz-client-1",
                "mqSet": [{"topic": self.name(), "brokerName": "broker-a", "queueId": self.rng.randrange(4)}]}
        return {}, json.dumps(body).encode("utf-8", "surrogatepass")

    req_42 = req_41

    def req_200(self) -> tuple[Ext, bytes]:
        body = {"groupName": self.name("group"), "consumeEnable": True, "consumeFromMinEnable": True,
                "consumeBroadcastEnable": True, "retryQueueNums": self.h.int_value(1, -(2**31), 2**31 - 1),
                "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1}
        return {}, json.dumps(body).encode("utf-8", "surrogatepass")

    def req_222(self) -> tuple[Ext, bytes]:
        return {"topic": self.name(), "group": self.name("group"), "timestamp": self.num(0), "isForce": "true"}, b""

    # ----- name server
    def broker_ext(self) -> Ext:
        return {"brokerName": self.fake_broker(), "brokerAddr": f"127.0.0.1:{self.rng.randrange(1, 3)}",
                "clusterName": "fz-cluster", "haServerAddr": "127.0.0.1:1", "brokerId": self.num(0),
                "compressed": "false"}

    def req_103(self) -> tuple[Ext, bytes]:
        r = self.rng
        topics = {self.name(): {"topicName": "", "readQueueNums": self.h.int_value(4, -(2**31), 2**31 - 1),
                                "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                "order": False} for _ in range(r.choice((1, 2, 3, 2000)))}
        for name, cfg in topics.items():
            cfg["topicName"] = name
        body = {"topicConfigTable": topics, "dataVersion": {"counter": r.randrange(100), "timestamp": 0},
                "filterServerList": []}
        return self.broker_ext(), json.dumps(body).encode("utf-8", "surrogatepass")

    def req_104(self) -> tuple[Ext, bytes]:
        return self.broker_ext(), b""

    def req_322(self) -> tuple[Ext, bytes]:
        return self.broker_ext(), b'{"counter":1,"timestamp":0}'
