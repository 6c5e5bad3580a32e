"""Agent frameworks against the gateway's OpenAI-compatible API (test/conformance/openai-tools.test.ts):
LangChain's ChatOpenAI with bind_tools, and the OpenAI Agents SDK running one agent with one
function tool to completion, twice: over the Responses API (its default model class,
OpenAIResponsesModel) and over chat completions (OpenAIChatCompletionsModel). Each case prints one
JSON line, as openai_sdk_check.py does.

    python openai_agents_check.py BASE_URL API_KEY MODEL
"""
import json
import sys

import pydantic


def run(name, fn):
    try:
        line = {"case": name, "ok": True, "value": fn()}
    except Exception as e:  # noqa: BLE001 — a failure is a result too (the test shows it)
        line = {"case": name, "ok": False, "error": {"class": type(e).__name__, "message": str(e)[:4000]}}
    print(json.dumps(line), flush=True)


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city!r}"


def langchain_case(base_url, api_key, model):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=model, base_url=base_url, api_key=api_key, max_retries=0).bind_tools([get_weather])
    msg = llm.invoke("What is the weather in Paris?")
    return {"tool_calls": msg.tool_calls, "content": msg.content}


class Forecast(pydantic.BaseModel):
    summary: str


def agents_case(base_url, api_key, model, model_class):
    import agents
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # nothing goes to OpenAI's trace collector
    called = []

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        called.append(city)
        return get_weather(city)

    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    # Over the Responses API the final answer is typed (text.format json_schema): the tiny LLMs end
    # a guided answer on their own, where words run to max_output_tokens — an incomplete response,
    # which the Agents SDK refuses as it refuses OpenAI's.
    typed = {"output_type": Forecast} if model_class == "OpenAIResponsesModel" else {}
    agent = Agent(name="forecaster", instructions="Answer with the weather.", tools=[weather],
                  model=getattr(agents, model_class)(model=model, openai_client=client), **typed)
    result = Runner.run_sync(agent, "What is the weather in Paris?", max_turns=4)
    final = result.final_output
    return {"final_output": final.model_dump() if typed else final, "called": called,
            "items": [type(i).__name__ for i in result.new_items]}


def main():
    base_url, api_key, model = sys.argv[1], sys.argv[2], sys.argv[3]
    run(f"{model} langchain bind_tools", lambda: langchain_case(base_url, api_key, model))
    run(f"{model} agents", lambda: agents_case(base_url, api_key, model, "OpenAIChatCompletionsModel"))
    run(f"{model} agents responses", lambda: agents_case(base_url, api_key, model, "OpenAIResponsesModel"))


main()
