#!/usr/bin/env python3
"""Time to first token and the gap between tokens of one zoo LLM reached two ways in the same run:
through the gateway's OpenAI API (`POST {prefix}/completions`, stream: true, server-sent events) and
directly with tritonclient.grpc streaming (start_stream / async_stream_infer over Triton's
ModelStreamInfer), as its users call it. Requests are sequential and the paths alternate request by
request (their order rotating), so both see the same machine at the same moment. The difference of
the two is what the gateway adds: at the first token (its parse, template, call set-up and first
event) and per token (one gRPC response turned into one SSE event).

    npm run build
    venv=$(bash test/triton/venv.sh test/openai/requirements.txt)
    $venv/bin/python bench/openai-ttft.py --start
        [--model tiny_llm|tiny_llm_trtllm] [--requests 200] [--warmup 20] [--max-tokens 64]
        [--sdk] [--json FILE]
    $venv/bin/python bench/openai-ttft.py --gateway http://127.0.0.1:PORT --triton-grpc 127.0.0.1:GRPC
        [--prefix /openai/v1] [--api-key KEY] ...

--start starts both itself and stops them at the end: a Triton with the zoo's two LLMs
(test/triton/zoo.py, its own venv) and the built gateway (bin/tensorgate) in front of it with those
models in `openai.models`. Otherwise give a running Triton serving the zoo and a gateway in front of
it. --sdk adds a third path: the gateway through the official `openai` SDK (its own client cost
included). A last row, "gateway (tool call)", is a chat completion offering one tool, streamed: the
time to the call's first chunk (the zoo LLM calls the tool in 5 tokens; the gateway's Hermes
parser starts the call once its name is read: docs/openai.md "Tools"), so the model's entry needs
`chatTemplate` and `toolParser: hermes` (--start sets them). Another, "gateway (responses)", is the
Responses API streamed (POST {prefix}/responses): its output_text.delta events, one a token (its
own prompt, through the chat template: its own text). The gateway path's client is the standard library's
http.client on one keep-alive connection, reading each event as it arrives; the direct path's
arrival times are taken in tritonclient's stream callback.
"""
import argparse
import http.client
import json
import math
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

import numpy as np
import tritonclient.grpc as grpcclient

PROMPT = "one two three four five six seven eight"  # no `slowly`: the zoo model answers without waits


def percentile(xs, q):
    s = sorted(xs)
    if not s:
        return math.nan
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Direct:
    """Triton's gRPC stream, one stream kept open for every request (as a tritonclient user keeps it)."""

    name = "triton-grpc (direct)"

    def __init__(self, url, model, max_tokens):
        self.client = grpcclient.InferenceServerClient(url)
        self.model = model
        self.got = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.got.put((time.perf_counter(), result, error)))
        config = self.client.get_model_config(model, as_json=True)["config"]
        # The inputs each convention reads (the vLLM backend's and TensorRT-LLM's), sent when the model
        # has them; the image only when the model requires one (empty: no image). A required input not
        # listed here is an error.
        max_tokens_json = json.dumps({"max_tokens": max_tokens}).encode()
        values = {
            "text_input": ("BYTES", np.array([PROMPT.encode()], dtype=np.object_)),
            "stream": ("BOOL", np.array([True])),
            "exclude_input_in_output": ("BOOL", np.array([True])),
            "sampling_parameters": ("BYTES", np.array([max_tokens_json], dtype=np.object_)),
            "max_tokens": ("INT32", np.array([max_tokens], dtype=np.int32)),
        }
        when_required = {"image": ("BYTES", np.array([b""], dtype=np.object_))}
        self.inputs = []
        for spec in config["input"]:
            name, optional = spec["name"], spec.get("optional", False)
            if name in values or (name in when_required and not optional):
                datatype, arr = values.get(name) or when_required[name]
                i = grpcclient.InferInput(name, list(arr.shape), datatype)
                i.set_data_from_numpy(arr)
                self.inputs.append(i)
            elif not optional:
                sys.exit(f"{model}: required input {name} is not one this bench knows how to fill")
        self.n = 0

    def request(self):
        self.n += 1
        start = time.perf_counter()
        self.client.async_stream_infer(self.model, self.inputs, request_id=str(self.n), enable_empty_final_response=True)
        arrivals, text = [], []
        while True:
            at, result, error = self.got.get(timeout=60)
            if error is not None:
                raise RuntimeError(f"Triton: {error}")
            out = result.as_numpy("text_output")
            if out is not None and out.size and len(out.reshape(-1)[0]):
                arrivals.append(at)
                text.append(out.reshape(-1)[0].decode())
            if result.get_response().parameters["triton_final_response"].bool_param:
                return start, arrivals, "".join(text)

    def close(self):
        self.client.stop_stream()
        self.client.close()


class Gateway:
    """The gateway's OpenAI completions, streamed: http.client on one keep-alive connection."""

    name = "gateway (OpenAI SSE)"

    def __init__(self, base, prefix, model, max_tokens, api_key):
        u = urllib.parse.urlsplit(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port or 80)
        self.path = f"{prefix}/completions"
        self.body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "stream": True}).encode()
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}

    def request(self):
        start = time.perf_counter()
        self.conn.request("POST", self.path, self.body, self.headers)
        r = self.conn.getresponse()
        if r.status != 200:
            raise RuntimeError(f"gateway: {r.status} {r.read()[:500]!r}")
        arrivals, text, pending, done = [], [], b"", False
        while True:
            data = r.read1(65536)
            if not data:
                break
            at = time.perf_counter()
            pending += data
            *events, pending = pending.split(b"\n\n")
            for e in events:
                if not e.startswith(b"data: "):
                    continue
                if e == b"data: [DONE]":
                    done = True
                    continue
                for choice in json.loads(e[6:])["choices"]:
                    if choice.get("text"):
                        arrivals.append(at)
                        text.append(choice["text"])
        if not done:
            raise RuntimeError("gateway: the stream ended without data: [DONE]")
        return start, arrivals, "".join(text)

    def close(self):
        self.conn.close()


TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


class ToolCall:
    """A streamed chat completion offering one tool: its arrival is the call's first chunk."""

    name = "gateway (tool call)"
    # Not the same text or token count as the other paths: its own row, no inter-token gaps.
    own = True

    def __init__(self, base, prefix, model, _max_tokens, api_key):
        u = urllib.parse.urlsplit(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port or 80)
        self.path = f"{prefix}/chat/completions"
        self.body = json.dumps({"model": model, "messages": [{"role": "user", "content": PROMPT}], "tools": [TOOL], "stream": True}).encode()
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}

    def request(self):
        start = time.perf_counter()
        self.conn.request("POST", self.path, self.body, self.headers)
        r = self.conn.getresponse()
        if r.status != 200:
            raise RuntimeError(f"gateway (tool call): {r.status} {r.read()[:500]!r}")
        arrivals, name, finish, pending = [], "", None, b""
        while True:
            data = r.read1(65536)
            if not data:
                break
            at = time.perf_counter()
            pending += data
            *events, pending = pending.split(b"\n\n")
            for e in events:
                if not e.startswith(b"data: {"):
                    continue
                for choice in json.loads(e[6:])["choices"]:
                    for c in choice["delta"].get("tool_calls") or []:
                        if "id" in c:
                            arrivals.append(at)
                            name = c["function"]["name"]
                    finish = choice.get("finish_reason") or finish
        if finish != "tool_calls" or name != TOOL["function"]["name"]:
            raise RuntimeError(f"gateway (tool call): finish_reason {finish}, call {name!r}")
        return start, arrivals, name

    def close(self):
        self.conn.close()


class ResponsesStream:
    """The Responses API, streamed: an arrival per response.output_text.delta event."""

    name = "gateway (responses)"
    # Its prompt goes through the chat template: its own text, its own row; a token an event.
    own = True
    per_token = True

    def __init__(self, base, prefix, model, max_tokens, api_key):
        u = urllib.parse.urlsplit(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port or 80)
        self.path = f"{prefix}/responses"
        self.body = json.dumps({"model": model, "input": PROMPT, "max_output_tokens": max_tokens, "stream": True}).encode()
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}

    def request(self):
        start = time.perf_counter()
        self.conn.request("POST", self.path, self.body, self.headers)
        r = self.conn.getresponse()
        if r.status != 200:
            raise RuntimeError(f"gateway (responses): {r.status} {r.read()[:500]!r}")
        arrivals, text, last, pending = [], "", None, b""
        while True:
            data = r.read1(65536)
            if not data:
                break
            at = time.perf_counter()
            pending += data
            *events, pending = pending.split(b"\n\n")
            for e in events:
                line = next((x for x in e.split(b"\n") if x.startswith(b"data: ")), None)
                if line is None:
                    continue
                ev = json.loads(line[6:])
                last = ev["type"]
                if last == "response.output_text.delta":
                    arrivals.append(at)
                    text += ev["delta"]
        if last not in ("response.completed", "response.incomplete"):
            raise RuntimeError(f"gateway (responses): the stream ended with {last!r}")
        return start, arrivals, text

    def close(self):
        self.conn.close()


class Sdk:
    """The same through the official openai SDK (its parsing and models included)."""

    name = "gateway (openai SDK)"

    def __init__(self, base, prefix, model, max_tokens, api_key):
        import openai
        self.client = openai.OpenAI(base_url=base.rstrip("/") + prefix, api_key=api_key or "unused")
        self.args = {"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "stream": True}

    def request(self):
        start = time.perf_counter()
        arrivals, text = [], []
        with self.client.completions.create(**self.args) as stream:
            for chunk in stream:
                for choice in chunk.choices:
                    if choice.text:
                        arrivals.append(time.perf_counter())
                        text.append(choice.text)
        return start, arrivals, "".join(text)

    def close(self):
        self.client.close()


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The zoo's LLMs as the gateway's OpenAI models (openai.models, as the flag's YAML flow list).
# With the demo's chat template and Hermes' tool parser, for the tool-call row.
TEMPLATE = json.dumps(os.path.join(ROOT, "config", "tiny_llm", "tokenizer_config.json"))
OPENAI_MODELS = (f"[{{id: tiny_llm, convention: vllm, chatTemplate: {TEMPLATE}, toolParser: hermes}}, "
                 f"{{id: tiny_llm_trtllm, convention: trtllm, chatTemplate: {TEMPLATE}, toolParser: hermes}}]")


class Stack:
    """--start: a Triton with the zoo's LLMs and the built gateway in front of it, each in a process
    group of its own, stopped (SIGTERM, then SIGKILL after 30 s) when the bench ends."""

    def __init__(self):
        self.children = []
        self.dir = tempfile.mkdtemp(prefix="openai-ttft-")
        venv = subprocess.run(["bash", os.path.join(ROOT, "test/triton/venv.sh")], check=True,
                              stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
        ready = self.start("triton", [os.path.join(venv, "bin/python"), os.path.join(ROOT, "test/triton/zoo.py"),
                                      "--models", "tiny_llm,tiny_llm_trtllm"], r"^TRITON_READY (\{.*\})$", 300)
        self.triton_grpc = f"127.0.0.1:{json.loads(ready.group(1))['grpc']}"
        gw = self.start("gateway", [os.path.join(ROOT, "bin/tensorgate"), "--backend", self.triton_grpc, "--host", "127.0.0.1",
                                    "--port", "0", "--metrics-port", "0", "--log-level", "warn", "--openai-models", OPENAI_MODELS],
                        r"listening on (http://[0-9.:]+)", 60)
        self.gateway = gw.group(1)

    def start(self, name, cmd, ready, timeout_s):
        out = open(os.path.join(self.dir, f"{name}.out"), "w+")
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.children.append(child)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            out.seek(0)
            m = re.search(ready, out.read(), re.M)
            if m:
                return m
            if child.poll() is not None:
                break
            time.sleep(0.2)
        out.seek(0)
        self.stop()
        sys.exit(f"{name} did not start ({' '.join(cmd)}):\n{out.read()[-4000:]}")

    def stop(self):
        for child in reversed(self.children):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                try:
                    child.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
        self.children = []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", action="store_true", help="start a Triton with the zoo's LLMs and the built gateway, stop them at the end")
    ap.add_argument("--gateway", help="the gateway's base URL, e.g. http://127.0.0.1:8000")
    ap.add_argument("--triton-grpc", help="Triton's gRPC address host:port")
    ap.add_argument("--model", default="tiny_llm")
    ap.add_argument("--requests", type=int, default=200, help="measured requests per path")
    ap.add_argument("--warmup", type=int, default=20, help="requests per path before measuring")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prefix", default="/openai/v1")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--sdk", action="store_true", help="also measure through the openai SDK")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    if a.start == bool(a.gateway or a.triton_grpc) or (not a.start and not (a.gateway and a.triton_grpc)):
        ap.error("give --start, or both --gateway and --triton-grpc")
    stack = None
    if a.start:
        stack = Stack()
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        a.gateway, a.triton_grpc = stack.gateway, stack.triton_grpc
    try:
        measure(a)
    finally:
        if stack is not None:
            stack.stop()


def measure(a):
    paths = [Direct(a.triton_grpc, a.model, a.max_tokens), Gateway(a.gateway, a.prefix, a.model, a.max_tokens, a.api_key)]
    if a.sdk:
        paths.append(Sdk(a.gateway, a.prefix, a.model, a.max_tokens, a.api_key))
    paths.append(ToolCall(a.gateway, a.prefix, a.model, a.max_tokens, a.api_key))
    paths.append(ResponsesStream(a.gateway, a.prefix, a.model, a.max_tokens, a.api_key))
    samples = {p.name: {"ttft": [], "gaps": [], "total": [], "tokens": []} for p in paths}
    texts = {}
    for i in range(a.warmup + a.requests):
        order = paths[i % len(paths):] + paths[:i % len(paths)]
        for p in order:
            start, arrivals, text = p.request()
            if getattr(p, "own", False):
                want = a.max_tokens if getattr(p, "per_token", False) else 1
                if len(arrivals) != want:
                    sys.exit(f"{p.name}: request {i} gave {len(arrivals)} arrivals, not {want}")
            elif texts.setdefault(p.name, text) != text or len(arrivals) != a.max_tokens:
                sys.exit(f"{p.name}: request {i} gave {len(arrivals)} tokens {text[:80]!r}, not {a.max_tokens} tokens {texts[p.name][:80]!r}")
            if i < a.warmup:
                continue
            s = samples[p.name]
            s["ttft"].append((arrivals[0] - start) * 1000)
            s["gaps"].extend((y - x) * 1000 for x, y in zip(arrivals, arrivals[1:]))
            s["total"].append((arrivals[-1] - start) * 1000)
    for p in paths:
        p.close()
    if len(set(texts.values())) != 1:
        sys.exit(f"the paths generated different texts: {texts}")

    rows = {}
    for name, s in samples.items():
        rows[name] = {
            "ttft_p50_ms": percentile(s["ttft"], 0.5), "ttft_p90_ms": percentile(s["ttft"], 0.9),
            "gap_mean_ms": statistics.fmean(s["gaps"]) if s["gaps"] else math.nan,
            "gap_p50_ms": percentile(s["gaps"], 0.5), "gap_p90_ms": percentile(s["gaps"], 0.9),
            "total_p50_ms": percentile(s["total"], 0.5),
        }
    direct = rows[paths[0].name]
    print(f"model {a.model}, {a.requests} requests per path after {a.warmup} warm-up, {a.max_tokens} tokens each, sequential, paths alternating\n")
    print("| path | TTFT p50 | TTFT p90 | inter-token gap mean | gap p50 | gap p90 | last token p50 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in rows.items():
        print(f"| {name} | {r['ttft_p50_ms']:.2f} ms | {r['ttft_p90_ms']:.2f} ms | {r['gap_mean_ms'] * 1000:.0f} µs | "
              f"{r['gap_p50_ms'] * 1000:.0f} µs | {r['gap_p90_ms'] * 1000:.0f} µs | {r['total_p50_ms']:.2f} ms |")
    for name, r in list(rows.items())[1:]:
        print(f"| {name} − direct | {r['ttft_p50_ms'] - direct['ttft_p50_ms']:+.2f} ms | {r['ttft_p90_ms'] - direct['ttft_p90_ms']:+.2f} ms | "
              f"{(r['gap_mean_ms'] - direct['gap_mean_ms']) * 1000:+.0f} µs | {(r['gap_p50_ms'] - direct['gap_p50_ms']) * 1000:+.0f} µs | "
              f"{(r['gap_p90_ms'] - direct['gap_p90_ms']) * 1000:+.0f} µs | {r['total_p50_ms'] - direct['total_p50_ms']:+.2f} ms |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "requests": a.requests, "warmup": a.warmup, "max_tokens": a.max_tokens, "paths": rows}, f, indent=2)


main()
