"""JSON-RPC 2.0 codes and response builders (no transport, no league logic)."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# MCP's code for resources/read of an unknown URI.
RESOURCE_NOT_FOUND = -32002
# A reply (or a batch's replies together) over the server's size bound (docs/protocol.md, "Limits").
REPLY_TOO_LARGE = -32003

MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    RESOURCE_NOT_FOUND: "Resource not found",
    REPLY_TOO_LARGE: "Reply too large",
}


class JsonRpcError(Exception):
    """A JSON-RPC-level fault: the request could not be routed or its params are unusable."""

    def __init__(self, code: int, message: str | None = None, data: Any = None, http_status: int = 200) -> None:
        self.code = code
        self.message = message or MESSAGES.get(code, "Error")
        self.data = data
        self.http_status = http_status  # of a request that is this one call (a batch answers 200)
        super().__init__(f"{code} {self.message}")


def error_response(request_id: Any, code: int, message: str | None = None, data: Any = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message or MESSAGES.get(code, "Error")}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def result_response(request_id: Any, result: Any) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
