// The official `openai` npm package against a pyrula proxy in replay mode.
// Input (argv[2], JSON): {baseURL, cases: [{name, body}], miss: body}.
// Output (stdout, JSON): per case the raw reply bytes (base64) and the parsed result, plus the
// error the SDK raised for the miss.
const OpenAI = require("openai");

async function main() {
  const input = JSON.parse(process.argv[2]);
  const client = new OpenAI({ apiKey: "sk-node-not-a-real-key", baseURL: input.baseURL, maxRetries: 2 });
  const out = { cases: {} };
  for (const { name, body } of input.cases) {
    await fetch(input.resetURL, { method: "POST" });
    const response = await client.chat.completions.create(body).asResponse();
    const raw = Buffer.from(await response.arrayBuffer()).toString("base64");
    await fetch(input.resetURL, { method: "POST" });
    let parsed;
    if (body.stream) {
      parsed = [];
      for await (const chunk of await client.chat.completions.create(body)) parsed.push(chunk);
    } else {
      parsed = await client.chat.completions.create(body);
    }
    out.cases[name] = { raw, parsed, status: response.status };
  }
  try {
    await client.chat.completions.create(input.miss);
    out.miss = null;
  } catch (err) {
    out.miss = { status: err.status, message: String(err.message), type: err.type, error: err.error };
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err));
  process.exit(1);
});
