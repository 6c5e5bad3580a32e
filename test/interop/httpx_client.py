"""The interop suite's Python client: httpx with h2 (HTTP/2 only: prior knowledge on http://, ALPN
h2 on https://). Reads the cases (JSON: name, method, path, headers, body in base64), sends each
`repeat` times on one connection, and prints one JSON line per answer: the status and the body in
base64, or the error httpx raised (a stream reset before END_STREAM is one: h2 raises StreamReset,
httpx RemoteProtocolError).

    python httpx_client.py CASES.json BASE_URL [CA.pem]
"""
import base64
import json
import sys

import httpx


def main() -> None:
    cases = json.load(open(sys.argv[1]))
    base = sys.argv[2]
    verify = sys.argv[3] if len(sys.argv) > 3 else True
    with httpx.Client(http1=False, http2=True, verify=verify, timeout=20.0) as client:
        for case in cases:
            for i in range(case.get("repeat", 1)):
                out = {"name": case["name"], "i": i}
                try:
                    r = client.request(case["method"], base + case["path"], headers=case.get("headers", {}),
                                       content=base64.b64decode(case["body"]) if case.get("body") else None)
                    out.update(status=r.status_code, version=r.http_version, body=base64.b64encode(r.content).decode())
                except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
                    out.update(error=f"{type(e).__name__}: {e}")
                print(json.dumps(out), flush=True)


main()
