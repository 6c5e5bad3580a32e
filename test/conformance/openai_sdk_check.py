"""The official `openai` Python SDK against the gateway's OpenAI-compatible API (test/conformance/
openai-sdk.test.ts). The SDK is used as its users use it: a client made with base_url and api_key
only, everything else its defaults (retries, timeouts, embeddings asked for as base64). Each case
prints one JSON line with what the SDK gave back; the test holds the expectations (the zoo models'
generator of docs/openai.md), for this script and its npm twin (openai_sdk_check.mjs) alike.

    python openai_sdk_check.py BASE_URL API_KEY GROUP [IMAGE_FILE | WRONG_KEY LIMITED_KEY]

GROUP: `main` (every case but the two below; IMAGE_FILE: the bytes sent as an image_url data: URL),
`abort:<model>` (a stream left after three chunks), `auth` (the key, then WRONG_KEY, then
LIMITED_KEY: a key for tiny_embed only), `basic` (models list and retrieve, a completion), `tools`
(tool calls whole, streamed and round trip, chat.completions.parse with a Pydantic model, bad tools;
the Responses API: responses.create, a tool round trip, responses.parse, responses.stream).
A line: {"case", "ok": true, "value"} or {"case", "ok": false, "error": {class, status, code,
param, type, message, body}}; a stream's value is its chunks, in order.
"""
import base64
import json
import sys
import time
import warnings

import openai

# The SDK's models type an embedding as list[float]; asked for base64 they hold the string, and
# pydantic warns when to_dict() writes it out. The string is what the test checks.
warnings.filterwarnings("ignore", message="Pydantic serializer warnings")

LLMS = ["tiny_llm", "tiny_llm_trtllm"]
CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name four letters."}]


def as_json(obj):
    return obj.to_dict(mode="json") if hasattr(obj, "to_dict") else obj


def run(name, fn):
    try:
        line = {"case": name, "ok": True, "value": fn()}
    except openai.APIStatusError as e:
        line = {"case": name, "ok": False, "error": {
            "class": type(e).__name__, "status": e.status_code, "code": e.code, "param": e.param,
            "type": e.type, "message": e.message, "body": e.body}}
    except Exception as e:  # noqa: BLE001 — any other failure is a result too (the test shows it)
        line = {"case": name, "ok": False, "error": {"class": type(e).__name__, "message": str(e)}}
    print(json.dumps(line), flush=True)


def chunks(stream):
    with stream:
        return [as_json(c) for c in stream]


def main_group(client, image_file):
    run("models.list", lambda: [as_json(m) for m in client.models.list()])
    run("models.retrieve", lambda: as_json(client.models.retrieve("tiny_llm")))
    run("models.retrieve unknown", lambda: as_json(client.models.retrieve("no_such_model")))
    for m in LLMS:
        cmp = client.completions.create
        run(f"{m} completion", lambda: as_json(cmp(model=m, prompt="one two three", max_tokens=5)))
        run(f"{m} completion stream", lambda: chunks(cmp(model=m, prompt="one two three", max_tokens=5, stream=True)))
        run(f"{m} completion stream usage", lambda: chunks(cmp(
            model=m, prompt="one two three", max_tokens=5, stream=True, stream_options={"include_usage": True})))
        run(f"{m} completion stop", lambda: as_json(cmp(model=m, prompt="one", max_tokens=10, stop=["delta"])))
        run(f"{m} completion stop stream", lambda: chunks(cmp(model=m, prompt="one", max_tokens=10, stop="delta", stream=True)))
        chat = client.chat.completions.create
        run(f"{m} chat", lambda: as_json(chat(model=m, messages=CHAT, max_tokens=4)))
        run(f"{m} chat stream", lambda: chunks(chat(model=m, messages=CHAT, max_tokens=4, stream=True)))
        run(f"{m} chat stream usage", lambda: chunks(chat(
            model=m, messages=CHAT, max_tokens=4, stream=True, stream_options={"include_usage": True})))
        run(f"{m} chat stop", lambda: as_json(chat(model=m, messages=CHAT, max_tokens=16, stop=["delta"])))
    run("tiny_llm completion echo", lambda: as_json(client.completions.create(model="tiny_llm", prompt="one two three", max_tokens=2, echo=True)))

    url = "data:image/png;base64," + base64.b64encode(open(image_file, "rb").read()).decode()
    vision = [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": url}}]}]
    run("tiny_llm chat image", lambda: as_json(client.chat.completions.create(model="tiny_llm", messages=vision, max_tokens=3)))
    run("tiny_llm chat image stream", lambda: chunks(client.chat.completions.create(model="tiny_llm", messages=vision, max_tokens=3, stream=True)))
    run("tiny_llm_trtllm chat image", lambda: as_json(client.chat.completions.create(model="tiny_llm_trtllm", messages=vision, max_tokens=3)))

    emb = client.embeddings.create
    run("embed float", lambda: as_json(emb(model="tiny_embed", input="hello world", encoding_format="float")))
    run("embed base64", lambda: as_json(emb(model="tiny_embed", input="hello world", encoding_format="base64")))
    run("embed default", lambda: as_json(emb(model="tiny_embed", input="hello world")))
    run("embed list", lambda: as_json(emb(model="tiny_embed", input=["hello world", "a b c"], encoding_format="float")))

    run("completion unknown model", lambda: as_json(client.completions.create(model="no_such_model", prompt="x", max_tokens=2)))
    run("chat unknown model", lambda: as_json(client.chat.completions.create(model="no_such_model", messages=CHAT)))
    run("embed unknown model", lambda: as_json(emb(model="no_such_model", input="x")))
    run("completion n=2", lambda: as_json(client.completions.create(model="tiny_llm", prompt="x", max_tokens=2, n=2)))
    run("chat n=2", lambda: as_json(client.chat.completions.create(model="tiny_llm", messages=CHAT, max_tokens=2, n=2)))
    # logprobs on the TensorRT-LLM convention: refused (docs/openai.md "Logprobs")
    run("chat logprobs", lambda: as_json(client.chat.completions.create(model="tiny_llm_trtllm", messages=CHAT, max_tokens=2, logprobs=True)))
    run("completion max_tokens=-1", lambda: as_json(client.completions.create(model="tiny_llm", prompt="x", max_tokens=-1)))


def abort_group(client, model):
    def leave():
        got, ms = [], []
        start = time.monotonic()
        stream = client.completions.create(model=model, prompt="count to two hundred slowly", max_tokens=200, stream=True)
        for chunk in stream:
            got.append(as_json(chunk))
            ms.append(round((time.monotonic() - start) * 1000))
            if len(got) == 3:
                break
        stream.close()  # closes the response: the connection goes, mid-stream
        return {"chunks": got, "ms": ms}
    run(f"{model} abort", leave)


def auth_group(client, wrong, limited):
    run("auth models.list", lambda: [m.id for m in client.models.list()])
    run("auth completion", lambda: as_json(client.completions.create(model="tiny_llm", prompt="one two three", max_tokens=2)))
    run("auth wrong key models.list", lambda: [m.id for m in wrong.models.list()])
    run("auth wrong key completion", lambda: as_json(wrong.completions.create(model="tiny_llm", prompt="one two three", max_tokens=2)))
    run("auth limited key embed", lambda: as_json(limited.embeddings.create(model="tiny_embed", input="hello world", encoding_format="float")))
    run("auth limited key completion", lambda: as_json(limited.completions.create(model="tiny_llm", prompt="one two three", max_tokens=2)))


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["city", "days"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def tools_group(client):
    """Tools and structured output (docs/openai.md "Tools", "Structured output"), on each tiny LLM."""
    import pydantic

    class Weather(pydantic.BaseModel):
        city: str
        temperature: float
        tags: list[str]

    chat = client.chat.completions
    for m in LLMS:
        run(f"{m} tools", lambda: as_json(chat.create(model=m, messages=ASK, tools=[WEATHER])))
        run(f"{m} tools stream", lambda: chunks(chat.create(model=m, messages=ASK, tools=[WEATHER], stream=True)))

        def round_trip():
            first = chat.create(model=m, messages=ASK, tools=[WEATHER]).choices[0].message
            call = first.tool_calls[0]
            history = ASK + [first.to_dict(mode="json", exclude_unset=True),
                             {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
            return {"call": as_json(first), "answer": as_json(chat.create(model=m, messages=history, tools=[WEATHER], max_tokens=3))}
        run(f"{m} tools round trip", round_trip)

        def parse():
            done = chat.parse(model=m, messages=ASK, response_format=Weather)
            return {"parsed": done.choices[0].message.parsed.model_dump(), "content": done.choices[0].message.content}
        run(f"{m} parse", parse)
    beta = getattr(getattr(getattr(client, "beta", None), "chat", None), "completions", None)
    if beta is not None and hasattr(beta, "parse"):
        run("tiny_llm beta parse", lambda: beta.parse(model="tiny_llm", messages=ASK, response_format=Weather).choices[0].message.parsed.model_dump())
    responses_cases(client, Weather)

    def logprobs():
        done = chat.create(model="tiny_llm", messages=ASK, max_tokens=2, logprobs=True, top_logprobs=2)
        return as_json(done.choices[0].logprobs)
    run("tiny_llm logprobs", logprobs)
    run("tools no name", lambda: as_json(chat.create(model="tiny_llm", messages=ASK, tools=[{"type": "function", "function": {"parameters": {}}}])))
    run("tools choice unknown", lambda: as_json(chat.create(model="tiny_llm", messages=ASK, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}})))


# The Responses API's function tool: flat, not nested under "function".
RESPONSES_WEATHER = {"type": "function", **WEATHER["function"]}
QUESTION = "What is the weather in Paris?"


def responses_cases(client, weather_model):
    """The Responses API (docs/openai.md "The Responses API"): create, a tool round trip, parse, stream."""
    rsp = client.responses
    for m in LLMS:
        def plain():
            r = rsp.create(model=m, instructions="Be terse.", input=QUESTION, max_output_tokens=3)
            return {"response": as_json(r), "output_text": r.output_text}
        run(f"{m} responses create", plain)

        def round_trip():
            first = rsp.create(model=m, input=QUESTION, tools=[RESPONSES_WEATHER])
            call = next(i for i in first.output if i.type == "function_call")
            history = [{"role": "user", "content": QUESTION}, call.to_dict(mode="json", exclude_unset=True),
                       {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}]
            answer = rsp.create(model=m, input=history, tools=[RESPONSES_WEATHER], max_output_tokens=3)
            return {"call": as_json(call), "answer": as_json(answer), "output_text": answer.output_text}
        run(f"{m} responses round trip", round_trip)

        def parse():
            done = rsp.parse(model=m, input=QUESTION, text_format=weather_model)
            return {"parsed": done.output_parsed.model_dump(), "output_text": done.output_text}
        run(f"{m} responses parse", parse)

        def stream():
            # Guided (a whole JSON value) the answer completes; a plain one is cut at max_output_tokens
            # (response.incomplete, after which the helper has no final response, as with OpenAI).
            with rsp.stream(model=m, input=QUESTION, text_format=weather_model) as s:
                types = [e.type for e in s]
                final = s.get_final_response()
            with rsp.stream(model=m, input=QUESTION, max_output_tokens=2) as s:
                cut = [as_json(e) for e in s]
            return {"types": types, "final": as_json(final), "parsed": final.output_parsed.model_dump(), "cut": cut}
        run(f"{m} responses stream", stream)

        def stream_call():
            with rsp.stream(model=m, input=QUESTION, tools=[RESPONSES_WEATHER]) as s:
                events = [as_json(e) for e in s]
                final = s.get_final_response()
            return {"events": events, "final": as_json(final)}
        run(f"{m} responses stream call", stream_call)
    run("responses previous_response_id", lambda: as_json(rsp.create(model="tiny_llm", input=QUESTION, previous_response_id="resp_x")))


def basic_group(client):
    run("basic models.list", lambda: [m.id for m in client.models.list()])
    run("basic models.retrieve", lambda: as_json(client.models.retrieve("tiny_llm")))
    run("basic completion", lambda: as_json(client.completions.create(model="tiny_llm", prompt="one two three", max_tokens=2)))


def main():
    base_url, api_key, group = sys.argv[1], sys.argv[2], sys.argv[3]
    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    if group == "main":
        main_group(client, sys.argv[4])
    elif group.startswith("abort:"):
        abort_group(client, group[len("abort:"):])
    elif group == "basic":
        basic_group(client)
    elif group == "tools":
        tools_group(client)
    elif group == "auth":
        auth_group(client, openai.OpenAI(base_url=base_url, api_key=sys.argv[4]), openai.OpenAI(base_url=base_url, api_key=sys.argv[5]))
    else:
        sys.exit(f"unknown group {group}")
    client.close()


main()
