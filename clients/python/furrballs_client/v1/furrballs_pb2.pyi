from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
SET_ALWAYS: SetMode
SET_IF_ABSENT: SetMode
SET_IF_VERSION: SetMode

class BatchRequest(_message.Message):
    __slots__ = ["id", "ops", "timeout_ms"]
    ID_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    id: int
    ops: _containers.RepeatedCompositeFieldContainer[PipelineRequest]
    timeout_ms: int
    def __init__(self, id: _Optional[int] = ..., ops: _Optional[_Iterable[_Union[PipelineRequest, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class BatchResponse(_message.Message):
    __slots__ = ["code", "id", "message", "results"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    code: int
    id: int
    message: str
    results: _containers.RepeatedCompositeFieldContainer[PipelineResponse]
    def __init__(self, id: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[PipelineResponse, _Mapping]]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ["key"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    def __init__(self, key: _Optional[bytes] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ["deleted"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ["key"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    def __init__(self, key: _Optional[bytes] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ["code", "found", "message", "ttl_remaining_ms", "value", "version"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TTL_REMAINING_MS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    code: int
    found: bool
    message: str
    ttl_remaining_ms: int
    value: bytes
    version: int
    def __init__(self, found: bool = ..., value: _Optional[bytes] = ..., version: _Optional[int] = ..., ttl_remaining_ms: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class MultiGetRequest(_message.Message):
    __slots__ = ["keys"]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, keys: _Optional[_Iterable[bytes]] = ...) -> None: ...

class MultiGetResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[GetResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[GetResponse, _Mapping]]] = ...) -> None: ...

class MultiSetRequest(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SetRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[SetRequest, _Mapping]]] = ...) -> None: ...

class MultiSetResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SetResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SetResult, _Mapping]]] = ...) -> None: ...

class NodeStats(_message.Message):
    __slots__ = ["deletes", "evictions", "expirations", "hits_local", "hits_remote", "live_bytes", "live_keys", "memory_limit_bytes", "misses", "node", "sets"]
    DELETES_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    EXPIRATIONS_FIELD_NUMBER: _ClassVar[int]
    HITS_LOCAL_FIELD_NUMBER: _ClassVar[int]
    HITS_REMOTE_FIELD_NUMBER: _ClassVar[int]
    LIVE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LIVE_KEYS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SETS_FIELD_NUMBER: _ClassVar[int]
    deletes: int
    evictions: int
    expirations: int
    hits_local: int
    hits_remote: int
    live_bytes: int
    live_keys: int
    memory_limit_bytes: int
    misses: int
    node: int
    sets: int
    def __init__(self, node: _Optional[int] = ..., hits_local: _Optional[int] = ..., hits_remote: _Optional[int] = ..., misses: _Optional[int] = ..., sets: _Optional[int] = ..., deletes: _Optional[int] = ..., evictions: _Optional[int] = ..., expirations: _Optional[int] = ..., live_keys: _Optional[int] = ..., live_bytes: _Optional[int] = ..., memory_limit_bytes: _Optional[int] = ...) -> None: ...

class PipelineRequest(_message.Message):
    __slots__ = ["delete", "get", "id", "set", "touch"]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    TOUCH_FIELD_NUMBER: _ClassVar[int]
    delete: DeleteRequest
    get: GetRequest
    id: int
    set: SetRequest
    touch: TouchRequest
    def __init__(self, id: _Optional[int] = ..., get: _Optional[_Union[GetRequest, _Mapping]] = ..., set: _Optional[_Union[SetRequest, _Mapping]] = ..., delete: _Optional[_Union[DeleteRequest, _Mapping]] = ..., touch: _Optional[_Union[TouchRequest, _Mapping]] = ...) -> None: ...

class PipelineResponse(_message.Message):
    __slots__ = ["code", "delete", "get", "id", "message", "set", "touch"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    TOUCH_FIELD_NUMBER: _ClassVar[int]
    code: int
    delete: DeleteResponse
    get: GetResponse
    id: int
    message: str
    set: SetResponse
    touch: TouchResponse
    def __init__(self, id: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., get: _Optional[_Union[GetResponse, _Mapping]] = ..., set: _Optional[_Union[SetResponse, _Mapping]] = ..., delete: _Optional[_Union[DeleteResponse, _Mapping]] = ..., touch: _Optional[_Union[TouchResponse, _Mapping]] = ...) -> None: ...

class SetRequest(_message.Message):
    __slots__ = ["expected_version", "key", "mode", "ttl_ms", "value"]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    expected_version: int
    key: bytes
    mode: SetMode
    ttl_ms: int
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., ttl_ms: _Optional[int] = ..., mode: _Optional[_Union[SetMode, str]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class SetResponse(_message.Message):
    __slots__ = ["version"]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class SetResult(_message.Message):
    __slots__ = ["code", "message", "version"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    version: int
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ["nodes"]
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeStats]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeStats, _Mapping]]] = ...) -> None: ...

class TouchRequest(_message.Message):
    __slots__ = ["key", "ttl_ms"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    ttl_ms: int
    def __init__(self, key: _Optional[bytes] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class TouchResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SetMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
