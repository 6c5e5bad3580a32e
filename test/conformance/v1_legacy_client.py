"""A legacy client written the way TF-Serving users write them: requests + base64 in JSON.

Usage: v1_legacy_client.py --gateway HOST:PORT. Prints one JSON summary line; exits 1 on a failure.
"""
import argparse
import base64
import json
import sys

import requests


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    url = f"http://{ap.parse_args().gateway}/v1/models"
    checks = 0

    # An "image" as TF-Serving clients send it: {"instances": [{"b64": ...}]}
    image = bytes((i * 7) % 256 for i in range(1000))
    r = requests.post(f"{url}/image_stats:predict", json={"instances": [{"b64": base64.b64encode(image).decode()}]})
    r.raise_for_status()
    assert r.json() == {"predictions": [{"LEN": [len(image)], "SUM": [sum(image)]}]}, r.text
    checks += 1

    # A BYTES input: the b64 value becomes one element.
    r = requests.post(f"{url}/blob_len/versions/1:predict", json={"instances": [{"b64": base64.b64encode(b"\x00\xff abc").decode()}]})
    r.raise_for_status()
    assert r.json() == {"predictions": [[6]]}, r.text
    checks += 1

    # Columnar, several inputs.
    r = requests.post(f"{url}/simple:predict", json={"inputs": {"INPUT0": [list(range(16))], "INPUT1": [[1] * 16]}})
    r.raise_for_status()
    assert r.json() == {"outputs": {"OUTPUT0": [[x + 1 for x in range(16)]], "OUTPUT1": [[x - 1 for x in range(16)]]}}, r.text
    checks += 1

    # Status and errors.
    r = requests.get(f"{url}/simple")
    assert r.status_code == 200 and r.json()["model_version_status"][0]["state"] == "AVAILABLE", r.text
    r = requests.post(f"{url}/image_stats:predict", json={"instances": [{"b64": "not*base64"}]})
    assert r.status_code == 400 and "error" in r.json(), r.text
    checks += 2

    print(json.dumps({"ok": True, "checks": checks}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
