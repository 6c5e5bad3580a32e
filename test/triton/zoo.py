#!/usr/bin/env python3
"""Start a real Triton Inference Server (via nvidia-pytriton) serving tensorgate's test model zoo.

Usage:
    python zoo.py [--http-port N] [--grpc-port N] [--metrics-port N] [--model-store DIR]
                  [--models a,b,c] [--unloaded a,b] [--log-verbose N] [--log-file FILE]
                  [--sagemaker-default-model M]
                  [--grpc-server-cert PEM --grpc-server-key PEM [--grpc-root-cert PEM] [--grpc-mutual]]

All endpoints bind to 127.0.0.1. A port of 0 (or an omitted flag) means "pick a free port".
When every model is ready, exactly one line is written to stdout:

    TRITON_READY {"http": 8000, "grpc": 8001, "metrics": 8002, "version": "2.x.y"}

Everything else (PyTriton and tritonserver logs) goes to stderr. SIGTERM / SIGINT stop the
server (tritonserver and its python backend stubs included) and exit with status 0; so does the
death of the parent process.

--sagemaker-default-model M: Triton also serves its SageMaker frontend (tritonserver
--allow-sagemaker) on a free port, POST /invocations calling model M; TRITON_READY then has
"sagemaker": PORT. (Its Vertex AI frontend cannot run under PyTriton: it wants its default model
loaded when it starts, and PyTriton loads models after tritonserver has started.)

--grpc-socket PATH: gRPC listens on a Unix domain socket instead (tritonserver --grpc-address
unix:PATH); tritonserver appends ":<grpc port>" to the path, and TRITON_READY gives the path it
listens on as "grpc_socket" ("grpc" is then only that suffix).

--model-store DIR: PyTriton workspace directory (must not exist, or be an empty directory).
The Triton model repository is DIR/model-store. Without it a temporary workspace is used.
The workspace is deleted on shutdown either way (PyTriton cleans it).

--models a,b,c: the model repository holds only these models of the zoo (default: all of them).
Each model costs a python backend stub and a second or more of start-up, so a subset starts
faster. An unknown name is an error (exit 2) that lists the zoo.

--unloaded a,b: these models (which must be among --models) are in the repository but unloaded
when TRITON_READY is printed (index state UNAVAILABLE, reason "unloaded"), as if unloaded through
the repository API; load them with it. (They are loaded and unloaded during start-up: PyTriton
connects to every model's stub once, at start-up.)

Triton runs with --model-control-mode explicit, so its repository API loads and unloads models at
run time: HTTP POST /v2/repository/models/<m>/load and .../unload, gRPC RepositoryModelLoad and
RepositoryModelUnload. An unloaded model stays in the repository (index state UNAVAILABLE, reason
"unloaded") and loads again, and answers inferences as soon as Triton reports it READY (zoo.py's
side follows it to its new stub: see StubFollowingSerializer).
Wait for UNAVAILABLE before loading again: Triton starts the new stub while the old one still
drains its inferences (UNLOADING), and a PyTriton model's sockets have fixed paths, so that load
fails (400 "load failed for model 'slow': version 1 is at UNAVAILABLE state: Internal: ...
Address already in use"; a load after the old stub has gone works).

--grpc-server-cert/--grpc-server-key: Triton's gRPC endpoint serves TLS with this certificate
(tritonserver --grpc-use-ssl). --grpc-mutual also requires a client certificate signed by
--grpc-root-cert (--grpc-use-ssl-mutual). HTTP stays plain (Triton's HTTP has no TLS), and PyTriton
itself talks to tritonserver over HTTP, so its start-up checks are unaffected.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import logging
import math
import os
import pathlib
import re
import signal
import socket
import sys
import threading
import time
import urllib.request

_T0 = time.monotonic()

# Keep the real stdout for the single TRITON_READY line; everything else written to fd 1
# (by us, by libraries or by child processes inheriting it) goes to stderr instead.
_READY_OUT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

import numpy as np  # noqa: E402
from pytriton.decorators import batch  # noqa: E402
from pytriton.model_config import ModelConfig, Tensor  # noqa: E402
from pytriton.proxy.communication import get_config_from_handshake_server  # noqa: E402
from pytriton.proxy.data import TensorStore, TensorStoreSerializerDeserializer  # noqa: E402
from pytriton.triton import Triton, TritonConfig, TritonLifecyclePolicy  # noqa: E402

try:  # present in recent PyTriton releases (0.7.0 has it)
    from pytriton.triton import TritonSecurityConfig  # noqa: E402
except ImportError:  # pragma: no cover
    TritonSecurityConfig = None

LOG = logging.getLogger("zoo")

MAX_BATCH = 8
IDENTITY_ROW_BYTES = 2 * 1024 * 1024
FAILING_MESSAGE = "failing model always fails"

IDENTITY_TYPES = {
    "fp16": np.float16,
    "fp32": np.float32,
    "fp64": np.float64,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "bool": np.bool_,
    "bytes": np.bytes_,
}


def batching():
    return ModelConfig(batching=True, max_batch_size=MAX_BATCH)


def no_batching():
    return ModelConfig(batching=False)


# ---------------------------------------------------------------- inference callables


@batch
def simple_fn(INPUT0, INPUT1):
    a = INPUT0.astype(np.int32)
    b = INPUT1.astype(np.int32)
    return {"OUTPUT0": (a + b).astype(np.int32), "OUTPUT1": (a - b).astype(np.int32)}


def _as_text(v):
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode("utf-8")
    return str(v)


@batch
def simple_string_fn(INPUT0, INPUT1):
    a = np.vectorize(lambda v: int(_as_text(v)), otypes=[np.int64])(INPUT0)
    b = np.vectorize(lambda v: int(_as_text(v)), otypes=[np.int64])(INPUT1)

    def to_bytes(arr):
        out = np.empty(arr.shape, dtype=object)
        for idx, v in np.ndenumerate(arr):
            out[idx] = str(int(v)).encode("utf-8")
        return out

    return {"OUTPUT0": to_bytes(a + b), "OUTPUT1": to_bytes(a - b)}


def identity_fn(requests):
    # Per-request (no concatenation) so requests of different lengths never interact.
    return [{"OUTPUT0": req["INPUT0"]} for req in requests]


@batch
def classifier_fn(INPUT):
    n = INPUT.shape[0]
    x = INPUT.astype(np.float32, copy=False).reshape(n, -1)[:, :150000].reshape(n, 1000, 150)
    return {"PROBS": x.mean(axis=2, dtype=np.float32)}


def image_stats_fn(requests):
    out = []
    for req in requests:
        img = req["IMAGE"]  # [n, L] uint8
        n = img.shape[0]
        length = np.full((n, 1), img.shape[1], dtype=np.int64)
        total = img.astype(np.uint64).sum(axis=1, dtype=np.uint64).reshape(n, 1)
        out.append({"LEN": length, "SUM": total})
    return out


def blob_len_fn(requests):
    out = []
    for req in requests:
        blob = req["BLOB"]  # [n, 1] object array of bytes
        lens = np.zeros(blob.shape, dtype=np.int64)
        for idx, v in np.ndenumerate(blob):
            lens[idx] = len(v) if isinstance(v, (bytes, np.bytes_)) else len(str(v).encode("utf-8"))
        out.append({"LEN": lens})
    return out


def blob_echo_fn(requests):
    return [{"ECHO": req["BLOB"]} for req in requests]


def big_output_fn(requests):
    out = []
    for req in requests:
        n = int(np.asarray(req["N"]).reshape(-1)[0])
        # Byte i is i % 251, made by repeating one period: arange(n, int64) % 251 took 13 s
        # for 128 MiB on a quiet 2-core machine (2 GiB of temporaries), past a test's bound under load.
        n = max(n, 0)
        out.append({"DATA": np.tile(np.arange(251, dtype=np.uint8), n // 251 + 1)[:n]})
    return out


def slow_fn(requests):
    out = []
    for req in requests:
        params = req.parameters or {}
        delay_ms = params.get("delay_ms", 1000)
        try:
            delay_ms = float(delay_ms)
        except (TypeError, ValueError):
            delay_ms = 1000.0
        time.sleep(max(delay_ms, 0.0) / 1000.0)
        out.append({"OUTPUT0": req["INPUT0"]})
    return out


def failing_fn(requests):
    raise RuntimeError(FAILING_MESSAGE)


def repeat_int32_fn(requests):
    # Decoupled: N responses, OUTPUT0 = [i] for i in 0..N-1 (one request at a time: no batching).
    # Request parameter `fail_after` = k: raise after k responses (a mid-stream error);
    # `delay_ms`: the wait before each response after the first (a stream a client can leave).
    req = requests[0]
    n = int(np.asarray(req["INPUT0"]).reshape(-1)[0])
    fail_after = (req.parameters or {}).get("fail_after")
    delay_ms = float((req.parameters or {}).get("delay_ms", 0))
    for i in range(max(n, 0)):
        if fail_after is not None and i >= int(fail_after):
            raise RuntimeError(f"repeat_int32 failed after {i} responses")
        if delay_ms > 0 and i > 0:
            time.sleep(delay_ms / 1000.0)
        yield [{"OUTPUT0": np.array([i], dtype=np.int32)}]


def echo_text_fn(requests):
    # Decoupled: one response per whitespace-separated word of TEXT, OUTPUT = [word].
    req = requests[0]
    text = b" ".join(bytes(v) if isinstance(v, (bytes, np.bytes_)) else str(v).encode("utf-8")
                     for v in np.asarray(req["TEXT"]).reshape(-1))
    for word in text.split():
        yield [{"OUTPUT": np.array([word], dtype=np.object_)}]


# ---------------------------------------------------------------- tiny LLMs and an embedder
# Deterministic stand-ins for an LLM served by Triton's vLLM backend (tiny_llm) and by
# TensorRT-LLM (tiny_llm_trtllm), and for an embedding model (tiny_embed): the OpenAI API's
# upstreams in tests and in the demo. gateway/reference-backend/zoo.ts has byte-identical twins
# (test/conformance/zoo-twins.test.ts compares them). The rule is _generate's. Inputs and outputs as
# the backends name them; optional inputs may be left out (Triton only counts a request's inputs: a
# missing text_input or max_tokens is the model's error). Outputs are always all there, whatever the
# return_* flags say. Not streaming, the prompt leads the text unless exclude_input_in_output is true
# (vLLM's default: prompt when not streaming, none when streaming). The last streamed response is
# followed by PyTriton's separate empty final response. A stream the client cancels runs to its end
# here: PyTriton 0.7.0 never asks the stub's request.is_cancelled() and cannot tell the callable.
# Triton shows the cancellation in its verbose log ("Cancellation notification received for
# ModelStreamInferHandler", then "skipping response generation as grpc transaction was cancelled"
# for each later token); nv_inference_request_failure{reason="CANCELED"} stays 0. stop_words with
# zero elements (shape [0]) is never answered (PyTriton fails on zero-size tensors and a decoupled
# model's failure is lost): send none.

VOCAB = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta", b"eta", b"theta",
         b"iota", b"kappa", b"lambda", b"mu", b"nu", b"xi", b"omicron", b"pi"]
DEFAULT_MAX_TOKENS = 16
MAX_TOKENS_LIMIT = 4096  # the model's "context length": a larger max_tokens is refused
SLOW_TOKEN_S = 0.05  # the wait before each token after the first, when the prompt has the word `slowly`


def _scalar(req, name, default=None):
    """The first element of an optional input, or `default` when the request does not carry it."""
    if name not in req.keys():
        return default
    v = np.asarray(req[name]).reshape(-1)
    if v.size == 0:
        return default
    return v[0]


def _element(v):
    return bytes(v) if isinstance(v, (bytes, np.bytes_)) else str(v).encode("utf-8")


def _max_tokens(v):
    # an integral number in range (5 and 5.0 alike: JSON does not tell them apart; a bool is no number)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1 <= v <= MAX_TOKENS_LIMIT or int(v) != v:
        raise ValueError(f"max_tokens must be an integer between 1 and {MAX_TOKENS_LIMIT}")
    return int(v)


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _sampling_parameters(raw):
    """tiny_llm's sampling_parameters (vLLM's JSON object): max tokens, stop strings, guide, logprobs; the rest is ignored."""
    if raw is None:
        return DEFAULT_MAX_TOKENS, [], None, 0
    try:
        params = json.loads(_element(raw).decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError):
        raise ValueError("sampling_parameters must be a JSON object") from None
    if not isinstance(params, dict):
        raise ValueError("sampling_parameters must be a JSON object")
    max_tokens = _max_tokens(params["max_tokens"]) if params.get("max_tokens") is not None else DEFAULT_MAX_TOKENS
    stop = params.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    elif not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise ValueError("stop must be a string or a list of strings")
    stops = [s.encode("utf-8", "replace") for s in stop]  # a lone surrogate: never matches
    logprobs = params.get("logprobs")
    logprobs = 0 if logprobs is None else logprobs
    if isinstance(logprobs, bool) or not isinstance(logprobs, int) or not 0 <= logprobs <= 20:
        raise ValueError("logprobs must be an integer from 0 to 20")
    return max_tokens, stops, _guided_decoding(params.get("guided_decoding")), logprobs


def token_logprobs(token, top):
    """A token's logprobs as Triton's vLLM backend writes them (zoo.ts tokenLogprobs): the word at
    -0.125, rank 1; the next top-1 words of VOCAB at -1.125, -2.125, ...; a scripted piece alone."""
    text = token.decode("utf-8", "replace")
    v = VOCAB.index(token.strip()) if token.strip() in VOCAB else -1
    out = {str(16 if v < 0 else v): {"logprob": -0.125, "rank": 1, "decoded_token": text}}
    if v >= 0:
        for k in range(1, top):
            out[str((v + k) % 16)] = {"logprob": -k - 0.125, "rank": k + 1, "decoded_token": " " + VOCAB[(v + k) % 16].decode("ascii")}
    return out


def _generate(prompt, max_tokens, stops, image):
    """The generation rule: yields (delta bytes, finish reason or None) per token, and stops itself.

    A token is " " + word; word i = VOCAB[(prompt words + i) % 16], word 0 replaced by
    "[image:<length>:<sha256[:8]>]" when there is an image. After each token the text so far is cut
    before the earliest stop string in it, and the generation ends ("stop"); after max_tokens it
    ends with "length". Text already given out stays given (the last delta may be empty).
    """
    n_prompt = len(prompt.split())
    text = b""
    for i in range(max_tokens):
        if i == 0 and image:
            word = f"[image:{len(image)}:{hashlib.sha256(image).hexdigest()[:8]}]".encode("ascii")
        else:
            word = VOCAB[(n_prompt + i) % len(VOCAB)]
        sent = len(text)
        text += b" " + word
        cuts = [at for at in (text.find(s) for s in stops if s) if at >= 0]
        if cuts:
            yield text[sent:max(min(cuts), sent)], "stop"
            return
        yield text[sent:], ("length" if i == max_tokens - 1 else None)


# What the tiny LLMs do with tools and schemas, as gateway/reference-backend/zoo.ts's twins: a
# prompt that offers tools as the demo's chat template writes them (Hermes': a `<tools>` block, a
# tool's JSON a line) and holds no tool result yet (`<tool_response>`) is answered with a call of
# the first tool in Hermes' format, its arguments a minimal instance of the tool's parameters;
# else guided decoding (vLLM's `guided_decoding` sampling parameter, TensorRT-LLM's
# guided_decoding_guide_type and guided_decoding_guide inputs) with a minimal instance of the
# schema ({} for json_object). Such a text is given out SCRIPT_PIECE characters a token.
SCRIPT_PIECE = 16


def minimal_instance(schema, root=None, depth=0):
    """A minimal instance of a JSON Schema: required properties only, each its type's least value."""
    root = schema if root is None else root
    if depth > 32 or not isinstance(schema, dict):
        return {}
    if isinstance(schema.get("$ref"), str):
        target = root
        for k in [k for k in schema["$ref"].lstrip("#").lstrip("/").split("/") if k]:
            target = target.get(k) if isinstance(target, dict) else None
        return minimal_instance(target, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for k in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(k), list) and schema[k]:
            return minimal_instance(schema[k][0], root, depth + 1)

    def count(v):
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

    t = schema.get("type")
    t = t[0] if isinstance(t, list) and t else t
    if t == "string":
        return "a" * int(count(schema.get("minLength")))
    if t in ("integer", "number"):
        if isinstance(schema.get("minimum"), (int, float)):
            return schema["minimum"]
        if isinstance(schema.get("exclusiveMinimum"), (int, float)):
            return math.floor(schema["exclusiveMinimum"]) + 1
        return 0
    if t == "boolean":
        return False
    if t == "null":
        return None
    if t == "array":
        return [minimal_instance(schema.get("items"), root, depth + 1) for _ in range(int(count(schema.get("minItems"))))]
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = [k for k in schema.get("required", []) if isinstance(k, str)] if isinstance(schema.get("required"), list) else []
    return {k: minimal_instance(props.get(k), root, depth + 1) for k in required}


def _compact(v):
    return json.dumps(v, separators=(",", ":"))


def _scripted(prompt, guide):
    """The text the prompt (a call) or else the guide dictates, or None: the words as usual."""
    call = _call(prompt.decode("utf-8", "replace"))
    if call is None and guide is not None:
        return _compact(minimal_instance(guide))
    return call


def _call(text):
    """A call of the first tool the prompt offers, when it holds no tool result yet; else None."""
    m = re.search(r"<tools>\n([^\n]*)\n", text)
    if m is None or "<tool_response>" in text:
        return None
    try:
        fn = json.loads(m.group(1)).get("function")
    except (ValueError, AttributeError):
        return None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return None
    params = fn.get("parameters")
    return "<tool_call>\n" + _compact({"name": fn["name"], "arguments": minimal_instance({} if params is None else params)}) + "\n</tool_call>"


def _recite(text, max_tokens):
    """A scripted text given out SCRIPT_PIECE characters a token, cut at max tokens."""
    n = -(-len(text) // SCRIPT_PIECE)
    for i in range(min(n, max_tokens)):
        finish = "stop" if i == n - 1 else ("length" if i == max_tokens - 1 else None)
        yield text[i * SCRIPT_PIECE:(i + 1) * SCRIPT_PIECE].encode("utf-8"), finish


def _guided_decoding(v):
    """vLLM's guided_decoding (an object, or its JSON text): `json` a schema, or `json_object`; None when not asked."""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            raise ValueError("guided_decoding must be a JSON object") from None
    if v is None:
        return None
    if not isinstance(v, dict):
        raise ValueError("guided_decoding must be a JSON object")
    if v.get("json") is not None:
        return json.loads(v["json"]) if isinstance(v["json"], str) else v["json"]
    if v.get("json_object") is True:
        return {}
    raise ValueError("guided_decoding: the tiny LLM follows json and json_object only")


def _trtllm_guide(req):
    """TensorRT-LLM's guide type (json, json_schema) and guide (the schema's JSON text); None when not asked."""
    t = _scalar(req, "guided_decoding_guide_type")
    if t is None:
        return None
    t = _element(t).decode("utf-8")
    if t == "json":
        return {}
    if t != "json_schema":
        raise ValueError("guided_decoding_guide_type: the tiny LLM follows json and json_schema only")
    try:
        return json.loads(_element(_scalar(req, "guided_decoding_guide", b"")).decode("utf-8"))
    except ValueError:
        raise ValueError("guided_decoding_guide must be a JSON schema") from None


async def _llm(req, max_tokens, stops, image, with_finish_reason, count_type, guide=None, logprobs=None):
    """One request of tiny_llm / tiny_llm_trtllm: one response per token when streaming, else one."""
    if "text_input" not in req.keys():  # Triton counts inputs: optional ones may stand in for it
        raise ValueError("the request has no text_input")
    prompt = _element(_scalar(req, "text_input"))
    stream = bool(_scalar(req, "stream", False))
    exclude = _scalar(req, "exclude_input_in_output")
    # vLLM's default: the prompt leads the text when not streaming, not when streaming
    prepend = (not stream) if exclude is None else not bool(exclude)
    n_prompt = len(prompt.split())
    slowly = b"slowly" in prompt.split()

    def response(text, tokens, finish):
        out = {
            "text_output": np.array([text], dtype=np.object_),
            "num_input_tokens": np.array([n_prompt], dtype=count_type),
            "num_output_tokens": np.array([len(tokens)], dtype=count_type),
        }
        if with_finish_reason:
            out["finish_reason"] = np.array([(finish or "").encode("ascii")], dtype=np.object_)
        if logprobs is not None:
            out["logprobs"] = np.array([json.dumps([token_logprobs(t, logprobs) for t in tokens]).encode("utf-8")], dtype=np.object_)
        return [out]

    pieces = []
    tokens = []
    script = _scripted(prompt, guide)
    steps = _generate(prompt, max_tokens, stops, image) if script is None else _recite(script, max_tokens)
    for i, (delta, finish) in enumerate(steps):
        if slowly and i > 0:
            await asyncio.sleep(SLOW_TOKEN_S)
        token = delta
        if i == 0 and prepend:
            delta = prompt + delta
        if stream:
            yield response(delta, [token], finish)
        else:
            pieces.append(delta)
            tokens.append(token)
            if finish is not None:
                yield response(b"".join(pieces), tokens, finish)


async def tiny_llm_fn(requests):
    # Decoupled, async (its waits do not hold up other streams): Triton's vLLM backend's tensors.
    req = requests[0]
    max_tokens, stops, guide, logprobs = _sampling_parameters(_scalar(req, "sampling_parameters"))
    image = _scalar(req, "image")
    image = _element(image) if image is not None else b""
    asked = bool(_scalar(req, "return_logprobs", False))
    async for r in _llm(req, max_tokens, stops, image, True, np.uint32, guide, logprobs if asked else None):
        yield r


async def tiny_llm_trtllm_fn(requests):
    # Decoupled, async: TensorRT-LLM's tensors (max_tokens and stop_words inputs, no finish reason).
    req = requests[0]
    if "max_tokens" not in req.keys():
        raise ValueError("the request has no max_tokens")
    max_tokens = _max_tokens(int(_scalar(req, "max_tokens")))
    stops = [_element(s) for s in np.asarray(req["stop_words"]).reshape(-1)] if "stop_words" in req.keys() else []
    async for r in _llm(req, max_tokens, stops, b"", False, np.int32, _trtllm_guide(req)):
        yield r


def tiny_embed_fn(requests):
    # embedding[j] = (sha256(text)[j] - 128) / 128, j < 8: exact in FP32.
    out = []
    for req in requests:
        text = _element(_scalar(req, "text_input"))
        digest = np.frombuffer(hashlib.sha256(text).digest()[:8], dtype=np.uint8)
        out.append({
            "embedding": ((digest.astype(np.float32) - 128.0) / 128.0).astype(np.float32),
            "num_input_tokens": np.array([len(text.split())], dtype=np.int32),
        })
    return out


# ---------------------------------------------------------------- zoo


def zoo_models():
    """Every model of the zoo, in load order: name -> triton.bind() keyword arguments."""
    i32 = np.int32
    b = np.bytes_
    zoo = {}

    def model(name, fn, inputs, outputs, config):
        zoo[name] = {"infer_func": fn, "inputs": inputs, "outputs": outputs, "config": config}

    model(
        "simple",
        simple_fn,
        [Tensor(name="INPUT0", dtype=i32, shape=(16,)), Tensor(name="INPUT1", dtype=i32, shape=(16,))],
        [Tensor(name="OUTPUT0", dtype=i32, shape=(16,)), Tensor(name="OUTPUT1", dtype=i32, shape=(16,))],
        batching(),
    )
    model(
        "simple_string",
        simple_string_fn,
        [Tensor(name="INPUT0", dtype=b, shape=(16,)), Tensor(name="INPUT1", dtype=b, shape=(16,))],
        [Tensor(name="OUTPUT0", dtype=b, shape=(16,)), Tensor(name="OUTPUT1", dtype=b, shape=(16,))],
        batching(),
    )
    for suffix, dt in IDENTITY_TYPES.items():
        model(
            f"identity_{suffix}",
            identity_fn,
            [Tensor(name="INPUT0", dtype=dt, shape=(-1,))],
            [Tensor(name="OUTPUT0", dtype=dt, shape=(-1,))],
            batching(),
        )
    # Fixed dims, so an output's size is known before the call (the shared-memory mode places such
    # outputs in its regions): rows of 2 MiB, a batch of 2 is 4 MiB, of 8 is 16 MiB.
    model(
        "identity_uint8_2mib",
        identity_fn,
        [Tensor(name="INPUT0", dtype=np.uint8, shape=(IDENTITY_ROW_BYTES,))],
        [Tensor(name="OUTPUT0", dtype=np.uint8, shape=(IDENTITY_ROW_BYTES,))],
        batching(),
    )
    model(
        "identity_fp32_nobatch",
        identity_fn,
        [Tensor(name="INPUT0", dtype=np.float32, shape=(-1, -1))],
        [Tensor(name="OUTPUT0", dtype=np.float32, shape=(-1, -1))],
        no_batching(),
    )
    model(
        "classifier_fp32",
        classifier_fn,
        [Tensor(name="INPUT", dtype=np.float32, shape=(3, 224, 224))],
        [Tensor(name="PROBS", dtype=np.float32, shape=(1000,))],
        batching(),
    )
    model(
        "image_stats",
        image_stats_fn,
        [Tensor(name="IMAGE", dtype=np.uint8, shape=(-1,))],
        [Tensor(name="LEN", dtype=np.int64, shape=(1,)), Tensor(name="SUM", dtype=np.uint64, shape=(1,))],
        batching(),
    )
    model(
        "blob_len",
        blob_len_fn,
        [Tensor(name="BLOB", dtype=np.bytes_, shape=(1,))],
        [Tensor(name="LEN", dtype=np.int64, shape=(1,))],
        batching(),
    )
    model(
        "blob_echo",
        blob_echo_fn,
        [Tensor(name="BLOB", dtype=np.bytes_, shape=(1,))],
        [Tensor(name="ECHO", dtype=np.bytes_, shape=(1,))],
        batching(),
    )
    model(
        "big_output",
        big_output_fn,
        [Tensor(name="N", dtype=np.int64, shape=(1,))],
        [Tensor(name="DATA", dtype=np.uint8, shape=(-1,))],
        no_batching(),
    )
    model(
        "slow",
        slow_fn,
        [Tensor(name="INPUT0", dtype=np.float32, shape=(-1,))],
        [Tensor(name="OUTPUT0", dtype=np.float32, shape=(-1,))],
        no_batching(),
    )
    model(
        "repeat_int32",
        repeat_int32_fn,
        [Tensor(name="INPUT0", dtype=np.int32, shape=(1,))],
        [Tensor(name="OUTPUT0", dtype=np.int32, shape=(1,))],
        ModelConfig(batching=False, decoupled=True),
    )
    model(
        "echo_text",
        echo_text_fn,
        [Tensor(name="TEXT", dtype=np.bytes_, shape=(1,))],
        [Tensor(name="OUTPUT", dtype=np.bytes_, shape=(1,))],
        ModelConfig(batching=False, decoupled=True),
    )
    opt = {"optional": True}
    flag = lambda name: Tensor(name=name, dtype=np.bool_, shape=(1,), optional=True)  # noqa: E731
    model(
        "tiny_llm",
        tiny_llm_fn,
        [
            Tensor(name="text_input", dtype=np.bytes_, shape=(1,)),
            flag("stream"),
            Tensor(name="sampling_parameters", dtype=np.bytes_, shape=(1,), **opt),
            flag("exclude_input_in_output"),
            flag("return_num_input_tokens"),
            flag("return_num_output_tokens"),
            flag("return_finish_reason"),
            flag("return_logprobs"),
            Tensor(name="image", dtype=np.bytes_, shape=(1,), **opt),
        ],
        [
            Tensor(name="text_output", dtype=np.bytes_, shape=(-1,)),
            Tensor(name="num_input_tokens", dtype=np.uint32, shape=(1,)),
            Tensor(name="num_output_tokens", dtype=np.uint32, shape=(1,)),
            Tensor(name="finish_reason", dtype=np.bytes_, shape=(1,)),
            Tensor(name="logprobs", dtype=np.bytes_, shape=(-1,)),
        ],
        ModelConfig(batching=False, decoupled=True),
    )
    model(
        "tiny_llm_trtllm",
        tiny_llm_trtllm_fn,
        [
            Tensor(name="text_input", dtype=np.bytes_, shape=(1,)),
            Tensor(name="max_tokens", dtype=np.int32, shape=(1,)),
            flag("stream"),
            Tensor(name="stop_words", dtype=np.bytes_, shape=(-1,), **opt),
            Tensor(name="temperature", dtype=np.float32, shape=(1,), **opt),
            Tensor(name="top_p", dtype=np.float32, shape=(1,), **opt),
            Tensor(name="frequency_penalty", dtype=np.float32, shape=(1,), **opt),
            Tensor(name="presence_penalty", dtype=np.float32, shape=(1,), **opt),
            Tensor(name="seed", dtype=np.uint64, shape=(1,), **opt),
            flag("exclude_input_in_output"),
            flag("return_num_input_tokens"),
            flag("return_num_output_tokens"),
            Tensor(name="guided_decoding_guide_type", dtype=np.bytes_, shape=(1,), **opt),
            Tensor(name="guided_decoding_guide", dtype=np.bytes_, shape=(1,), **opt),
        ],
        [
            Tensor(name="text_output", dtype=np.bytes_, shape=(-1,)),
            Tensor(name="num_input_tokens", dtype=np.int32, shape=(1,)),
            Tensor(name="num_output_tokens", dtype=np.int32, shape=(1,)),
        ],
        ModelConfig(batching=False, decoupled=True),
    )
    model(
        "tiny_embed",
        tiny_embed_fn,
        [Tensor(name="text_input", dtype=np.bytes_, shape=(1,))],
        [Tensor(name="embedding", dtype=np.float32, shape=(8,)), Tensor(name="num_input_tokens", dtype=np.int32, shape=(1,))],
        no_batching(),
    )
    model(
        "failing",
        failing_fn,
        [Tensor(name="INPUT0", dtype=np.float32, shape=(-1,))],
        [Tensor(name="OUTPUT0", dtype=np.float32, shape=(-1,))],
        batching(),
    )
    return zoo


# ---------------------------------------------------------------- plumbing


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_ports(requested):
    chosen = []
    for p in requested:
        if p:
            chosen.append(p)
            continue
        while True:
            candidate = free_port()
            if candidate not in chosen and candidate not in requested:
                chosen.append(candidate)
                break
    return chosen


def server_version(http_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2", timeout=10) as resp:
        return json.loads(resp.read().decode("utf-8")).get("version", "")


def speed_up_shutdown(triton):
    """Make triton.stop() clean the per-model proxies in parallel.

    Triton.stop() first stops tritonserver, then ModelManager.clean() tears down each model's
    in-process inference handler one after the other (~1 s each, ~20 s for the zoo). The server is
    already gone at that point, so the only thing the original clean() does besides model.clean()
    (unloading models from a live server) is skipped anyway. Falls back silently if the private
    attribute layout differs (other PyTriton versions).
    """
    from concurrent.futures import ThreadPoolExecutor

    manager = getattr(triton, "_model_manager", None)
    if manager is None or not hasattr(manager, "_models") or not hasattr(manager, "clean"):
        return
    original_clean = manager.clean

    def parallel_clean():
        server = getattr(triton, "_triton_server", None)
        if server is not None and server.is_alive():
            return original_clean()  # not expected: keep PyTriton's own behaviour (unloads models)
        models = list(manager.models)
        if models:
            with ThreadPoolExecutor(max_workers=len(models)) as pool:
                for fut in [pool.submit(m.clean) for m in models]:
                    try:
                        fut.result()
                    except Exception:  # noqa: BLE001
                        LOG.exception("error while cleaning a model proxy")
        manager._models.clear()

    manager.clean = parallel_clean


def reap_leftovers(workspace_path):
    """Kill processes this zoo started that outlived triton.stop(), and remove their shm segments.

    When tritonserver is stopped while it is still loading models (signal during start-up) it
    exits without waiting for python backend stubs that are mid-initialisation; those stay alive
    forever (observed with PyTriton 0.7.0 / Triton 2.51.0). They are recognised by our workspace
    path on their command line. Returns the number of processes killed.
    """
    marker = str(workspace_path).rstrip("/") + "/"
    me = os.getpid()
    victims = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmd:
            victims.append(int(entry))
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if victims:
        LOG.warning("killed %d leftover process(es): %s", len(victims), victims)
    # python backend shared memory regions are named after our pid (PyTriton's shm-region-prefix-name)
    prefix = f"pytrtion{me}-"
    try:
        for name in os.listdir("/dev/shm"):
            if name.startswith(prefix):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass
    except OSError:
        pass
    return len(victims)


class StubFollowingSerializer:
    """A model's tensor-store client that follows the model to each new stub Triton starts for it.

    A PyTriton model has two halves: the python backend stub Triton starts when it loads the model,
    and the inference handler in this process. PyTriton connects the handler once, at start-up: a
    handshake on DIR/<model>-config.sock hands over the stub's tensor store (shared memory for the
    tensors, DIR/<model>-data.sock, with its own authkey); requests and responses travel on the
    stub's ZeroMQ socket DIR/<model>_0_0-server.sock. Triton's repository API unloads and loads
    models by itself (explicit model control): an unload ends the stub, and the model stays in the
    repository (UNAVAILABLE, reason "unloaded"); a load starts a new stub with a new tensor store at
    the same path. ZeroMQ reconnects the handler to the new stub's socket by itself, but the
    handler kept using the old store: every inference after a reload failed (INTERNAL,
    BrokenPipeError), and PyTriton 0.7.0 has no call to reconnect it.

    Every request passes deserialize_requests() first. If the handshake socket is another file
    than the one this client connected through (a new stub made it; it does so before it opens its
    request socket, so before any request can come from it), the client reconnects to the new
    store first. Nothing polls, and no request can meet the old store: the old stub is gone by
    then (a second stub of a PyTriton model cannot start while the first lives: its sockets are
    taken, and the load fails).
    """

    def __init__(self, inner, handshake_socket):
        self._inner = inner
        self._handshake_socket = pathlib.Path(handshake_socket)
        self._stub = None
        self._lock = threading.Lock()

    def _identity(self):
        # The inode alone does not tell stubs apart: the new stub unlinks the old file and binds a
        # new one, which often gets the freed inode number again; the creation time does.
        try:
            st = os.stat(self._handshake_socket)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_ctime_ns)

    def connect(self, url, authkey=None):
        """Model.setup(): the first connection, to the stub it just shook hands with."""
        with self._lock:
            self._stub = self._identity()
            self._inner.connect(url, authkey)

    def _follow(self):
        stub = self._identity()
        if stub is None or stub == self._stub:
            return
        with self._lock:
            if stub == self._stub:
                return
            t = time.monotonic()
            config = get_config_from_handshake_server(self._handshake_socket, timeout_s=10.0)
            data_socket = pathlib.Path(config["data_socket"]).as_posix()
            self._inner.close()
            # PyTriton keeps one TensorStore per address for the life of the process, holding the first
            # stub's authkey: the new store (same path, new key) would reject it ("digest sent was
            # rejected"). Forget it, so connect() makes one with the new key.
            TensorStore._instances.pop(data_socket, None)
            self._inner.connect(data_socket, base64.decodebytes(config["authkey"].encode("ascii")))
            self._stub = stub
            LOG.info("%s: reconnected to the new stub's tensor store in %.0f ms", self._handshake_socket.name, (time.monotonic() - t) * 1000)

    def deserialize_requests(self, requests_payload):
        self._follow()
        return self._inner.deserialize_requests(requests_payload)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def follow_stubs(triton):
    """Wraps each bound model's tensor-store client in a StubFollowingSerializer (before triton.run())."""
    workspace = pathlib.Path(triton._workspace.path)
    for model in triton._model_manager.models:
        inner = getattr(model, "_serializer_deserializer", None)
        if isinstance(inner, TensorStoreSerializerDeserializer):
            model._serializer_deserializer = StubFollowingSerializer(inner, workspace / f"{model.model_name}-config.sock")


def unload_models(http_port, names, timeout_s=120.0):
    """Unloads `names` through Triton's repository API and waits until each is UNAVAILABLE."""
    for name in names:
        req = urllib.request.Request(f"http://127.0.0.1:{http_port}/v2/repository/models/{name}/unload", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=timeout_s):
            pass
    end = time.monotonic() + timeout_s
    while True:
        req = urllib.request.Request(f"http://127.0.0.1:{http_port}/v2/repository/index", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            states = {m["name"]: m.get("state") for m in json.loads(resp.read())}
        left = [n for n in names if states.get(n) != "UNAVAILABLE"]
        if not left:
            return
        if time.monotonic() > end:
            raise TimeoutError(f"models still not unloaded after {timeout_s} s: {left}")
        time.sleep(0.05)


def watch_parent():
    """Stop (as on SIGTERM) when the process that started us is gone.

    A test runner killed hard (jest worker crash, SIGKILL) cannot stop us; without this the zoo,
    tritonserver and its stubs would outlive it, holding ports and memory.
    """
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        LOG.warning("parent process %d is gone, stopping", parent)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def grpc_tls(args):
    """TritonConfig's gRPC TLS fields (tritonserver --grpc-use-ssl[-mutual], --grpc-server-cert, ...)."""
    if args.grpc_server_cert is None:
        return {}
    tls = {
        "grpc_use_ssl": True,
        "grpc_server_cert": pathlib.Path(args.grpc_server_cert).resolve(),
        "grpc_server_key": pathlib.Path(args.grpc_server_key).resolve(),
    }
    if args.grpc_root_cert is not None:
        tls["grpc_root_cert"] = pathlib.Path(args.grpc_root_cert).resolve()
    if args.grpc_mutual:
        tls["grpc_use_ssl_mutual"] = True
    return tls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--http-port", type=int, default=0)
    ap.add_argument("--grpc-port", type=int, default=0)
    ap.add_argument("--metrics-port", type=int, default=0)
    ap.add_argument("--model-store", default=None, help="workspace dir (models end up in DIR/model-store)")
    ap.add_argument("--log-verbose", type=int, default=0)
    ap.add_argument("--log-file", default=None, help="tritonserver's own log goes to this file (else it is kept in memory)")
    ap.add_argument("--grpc-socket", default=None,
                    help="gRPC on this Unix domain socket instead of 127.0.0.1 (--grpc-address unix:PATH); tritonserver "
                         "appends ':<grpc port>' to the path, and TRITON_READY gives the whole path as grpc_socket")
    ap.add_argument("--grpc-server-cert", default=None, help="PEM: gRPC serves TLS with this certificate")
    ap.add_argument("--grpc-server-key", default=None, help="PEM: the key of --grpc-server-cert")
    ap.add_argument("--grpc-root-cert", default=None, help="PEM: the CA client certificates must chain to (--grpc-mutual)")
    ap.add_argument("--grpc-mutual", action="store_true", help="gRPC requires a client certificate (mTLS)")
    ap.add_argument("--models", default=None, help="comma-separated: the repository holds only these models of the zoo (default: all)")
    ap.add_argument("--unloaded", default="", help="comma-separated: in the repository but unloaded when ready (load them with the repository API)")
    ap.add_argument("--sagemaker-default-model", default=None,
                    help="also serve Triton's SageMaker frontend (--allow-sagemaker) on a free port, /invocations calling this model")
    args = ap.parse_args()
    zoo = zoo_models()
    names = list(zoo) if args.models is None else [m for m in args.models.split(",") if m]
    unloaded = [m for m in args.unloaded.split(",") if m]
    unknown = [m for m in names if m not in zoo]
    if unknown or not names:
        ap.error(f"--models: unknown model(s) {','.join(unknown) or '(none given)'}; the zoo has {','.join(zoo)}")
    if any(m not in names for m in unloaded):
        ap.error(f"--unloaded: {','.join(m for m in unloaded if m not in names)} not in the repository (--models)")
    if (args.grpc_server_cert is None) != (args.grpc_server_key is None) or (args.grpc_mutual and args.grpc_root_cert is None):
        ap.error("--grpc-server-cert and --grpc-server-key go together; --grpc-mutual needs --grpc-root-cert")

    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    http_port, grpc_port, metrics_port = pick_ports([args.http_port, args.grpc_port, args.metrics_port])
    sagemaker = {}
    if args.sagemaker_default_model is not None:
        # tritonserver reads the default model from its environment (src/sagemaker_server.h), which PyTriton passes on
        os.environ["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] = args.sagemaker_default_model
        sagemaker_port = [p for p in pick_ports([0, http_port, grpc_port, metrics_port]) if p not in (http_port, grpc_port, metrics_port)][0]
        sagemaker = {"allow_sagemaker": True, "sagemaker_port": sagemaker_port}

    workspace = None
    if args.model_store:
        ws = pathlib.Path(args.model_store).resolve()
        if ws.exists():
            if not ws.is_dir() or any(ws.iterdir()):
                LOG.error("--model-store %s must not exist or be an empty directory", ws)
                return 2
            ws.rmdir()  # PyTriton's Workspace insists on creating the directory itself
        workspace = ws

    config = TritonConfig(
        http_address="127.0.0.1",
        grpc_address="127.0.0.1" if args.grpc_socket is None else "unix:" + args.grpc_socket,
        metrics_address="127.0.0.1",
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        allow_gpu_metrics=False,
        log_verbose=args.log_verbose,
        log_file=pathlib.Path(args.log_file).resolve() if args.log_file else None,
        exit_timeout_secs=5,
        **grpc_tls(args),
        **sagemaker,
    )
    kwargs = {}
    if TritonSecurityConfig is not None:
        kwargs["security_config"] = TritonSecurityConfig(restricted_endpoints=[])
    policy = TritonLifecyclePolicy(launch_triton_on_startup=False, local_model_store=True)

    stop_event = threading.Event()
    starting = [True]

    def on_signal(signum, _frame):
        LOG.info("signal %s received, stopping", signum)
        first = not stop_event.is_set()
        stop_event.set()
        if starting[0] and first:
            # abort the blocking start-up (triton.run() waits for all models); cleaned up in `finally`
            raise KeyboardInterrupt

    triton = Triton(config=config, workspace=workspace, triton_lifecycle_policy=policy, **kwargs)
    speed_up_shutdown(triton)
    workspace_path = triton._workspace.path
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    watch_parent()
    exit_code = 0
    try:
        for name in names:
            triton.bind(model_name=name, **zoo[name])  # writes the model into the local model store
        follow_stubs(triton)
        if not stop_event.is_set():
            triton.run()  # launches tritonserver (loads all models from the store) and waits for them
        if not stop_event.is_set() and unloaded:
            # PyTriton connects its side of every model at start-up, to stubs that must exist then:
            # load all, then unload these (a later load is followed by StubFollowingSerializer)
            unload_models(http_port, unloaded)
        if not stop_event.is_set():
            version = server_version(http_port)
            ready = {"http": http_port, "grpc": grpc_port, "metrics": metrics_port, "version": version}
            if args.grpc_socket is not None:
                # Triton's src/grpc/grpc_server.cc (triton-inference-server/server) listens on address + ":" + port, the socket's path included
                ready["grpc_socket"] = f"{args.grpc_socket}:{grpc_port}"
            if sagemaker:
                ready["sagemaker"] = sagemaker["sagemaker_port"]
            LOG.info("zoo ready in %.2fs, model store %s", time.monotonic() - _T0, triton._workspace.model_store_path)
            _READY_OUT.write("TRITON_READY " + json.dumps(ready) + "\n")
            _READY_OUT.flush()
        starting[0] = False
        while not stop_event.wait(1.0):
            if not triton.is_alive():
                LOG.error("tritonserver or a model proxy died")
                exit_code = 1
                break
    except KeyboardInterrupt:
        LOG.info("start-up interrupted")
    except Exception:  # noqa: BLE001
        LOG.exception("zoo failed")
        exit_code = 1
    finally:
        starting[0] = False
        t = time.monotonic()
        try:
            triton.stop()
        except Exception:  # noqa: BLE001
            LOG.exception("error while stopping triton")
            exit_code = exit_code or 1
        time.sleep(0.2)
        reap_leftovers(workspace_path)
        LOG.info("stopped in %.2fs", time.monotonic() - t)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
