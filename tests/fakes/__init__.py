"""The stand-in providers every test uses; nothing here talks to a network beyond 127.0.0.1.

- `provider`: `Upstream`, an in-process provider (a MockTransport of the SDK's own HTTP stack)
  answering from a reply function and logging each request; `json_reply`, `sse_reply`, the HTTP
  stack each SDK sends through, and `sdk_client`.
- `server`: `Server`, the same idea as a real HTTP/1.1 server on 127.0.0.1 for clients that
  bring their own stack (botocore, the proxy, subprocesses); `serving` puts an in-process
  stand-in's reply function behind it.
- `openai_api`, `anthropic_api`, `gemini_api`, `bedrock_api`: each provider's reply builders
  (plain and streamed), the surfaces the drop-in tests call, and SDK clients sending to a
  stand-in. OpenAI-compatible providers are `openai_api.upstream(base_path=...)`.
- `postgres`: a real, throwaway PostgreSQL and a fresh schema per test; `hosts`: hosts for the
  several-hosts tests (network namespaces on a bridge where `ip netns` works, else process
  groups), each with its own `PYRULA_HOST_ID`, to kill, cut off and bring back.
"""
