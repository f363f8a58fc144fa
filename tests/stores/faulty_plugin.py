"""A memory-store plugin that misbehaves on request, for the host's fault tests.

    python faulty_plugin.py MODE

A plain script (nothing from animus_flows): it keeps items in a dict and answers like a plugin
should, except where MODE says otherwise:

    ok              behave
    hang-init       never answer initialize
    hang-query      never answer memory/query (everything else works)
    crash-put       exit with code 3 on memory/put, after a line on stderr
    garbage         print a non-JSON line instead of answering memory/get
    exit-early      print a line on stderr and exit with code 4 before reading anything
    version         report protocol 9.0.0
    reorder         answer every pair of requests in reverse order
    read-only       refuse memory/put with the write-denied code
    helper          start a helper process (sleep) in its group, then hang on memory/query
    silent-exit     close stdout and keep running
    slow-query      take half a second to answer memory/query

FAULTY_PLUGIN_LINE, when set, replaces the line that `garbage` prints on stdout and
`exit-early` on stderr.
"""

import json
import os
import subprocess
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
LINE = os.environ.get("FAULTY_PLUGIN_LINE")
ITEMS = {}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def result(method, params):
    scope = json.dumps(params.get("scope"), sort_keys=True)
    if method == "initialize":
        version = "9.0.0" if MODE == "version" else "0.1.0"
        return {
            "protocol_version": version,
            "plugin_id": os.environ.get("FAULTY_PLUGIN_ID", "faulty"),
            "capabilities": {
                "native_ttl": False,
                "native_key_get": True,
                "strong_consistency": True,
                "max_query_top_k": 5,
            },
        }
    if method == "memory/put":
        item = {
            "scope": params["scope"],
            "key": params["key"],
            "value": params["value"],
            "metadata": params.get("metadata") or {},
            "created_at": now(),
            "updated_at": now(),
            "expires_at": None,
        }
        ITEMS[(scope, params["key"])] = item
        return item
    if method == "memory/get":
        return ITEMS.get((scope, params["key"]))
    if method == "memory/query":
        hits = [
            {"key": item["key"], "value": item["value"], "score": 0.5, "metadata": item["metadata"]}
            for (s, _), item in ITEMS.items()
            if s == scope
        ]
        return {"hits": hits[: params.get("top_k", 8)]}
    if method == "memory/list_scopes":
        return {"scopes": [], "next_cursor": None}
    if method == "memory/delete_scope":
        gone = [k for k in ITEMS if k[0] == scope]
        for k in gone:
            del ITEMS[k]
        return {"deleted": len(gone)}
    return None


def main():
    if MODE == "exit-early":
        print(LINE or "faulty plugin: missing configuration file plugin.toml", file=sys.stderr)
        sys.exit(4)
    held = []
    for line in sys.stdin:
        request = json.loads(line)
        method, params = request["method"], request.get("params") or {}
        if MODE == "hang-init" and method == "initialize":
            time.sleep(3600)
        if MODE in ("hang-query", "helper") and method == "memory/query":
            if MODE == "helper":
                subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            time.sleep(3600)
        if MODE == "crash-put" and method == "memory/put":
            print("faulty plugin: segfault in the storage engine", file=sys.stderr, flush=True)
            sys.exit(3)
        if MODE == "garbage" and method == "memory/get":
            print(LINE or "Loading model weights... done", flush=True)
            continue
        if MODE == "silent-exit" and method == "memory/get":
            os.close(1)
            time.sleep(3600)
        if MODE == "slow-query" and method == "memory/query":
            time.sleep(0.5)
        if MODE == "read-only" and method == "memory/put":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {
                        "code": -32002,
                        "message": "this corpus is read-only; use another store for writes",
                        "data": {"error": "WriteDenied"},
                    },
                }
            )
            continue
        response = {"jsonrpc": "2.0", "id": request["id"], "result": result(method, params)}
        if MODE == "reorder" and method != "initialize":
            held.append(response)
            if len(held) == 2:
                send(held[1])
                send(held[0])
                held.clear()
            continue
        send(response)


if __name__ == "__main__":
    main()
