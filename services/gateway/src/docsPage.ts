/**
 * A self-contained HTML reference rendered from an OpenAPI document on the server: no script, no CDN,
 * so it works offline and under a strict Content-Security-Policy. Used for the public API and reusable
 * for the admin API's document.
 */
type Json = Record<string, unknown>;

const esc = (s: unknown) => String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Inline code spans (`x`) and line breaks of the document's descriptions, after escaping. */
const text = (s: unknown) => esc(s).replace(/`([^`]+)`/g, '<code>$1</code>').replace(/\n/g, '<br>');

function resolve(doc: Json, node: unknown): Json {
  let n = node as Json;
  for (let i = 0; i < 10 && n && typeof n.$ref === 'string'; i++) {
    n = (n.$ref as string).slice(2).split('/').reduce<unknown>((o, k) => (o as Json)?.[k], doc) as Json;
  }
  return n ?? {};
}

/** JSON in a <pre>, with each `$ref` to a named schema linked to that schema's entry on the page. */
const pre = (v: unknown) =>
  `<pre>${esc(JSON.stringify(v, null, 2)).replace(/&#34;#\/components\/schemas\/([\w.-]+)&#34;/g, (_m, name: string) => `&#34;<a href="#schema-${name}">#/components/schemas/${name}</a>&#34;`)}</pre>`;

/** Who may call an operation: an API key's scope, any key, the document's scheme (the admin token), or, for a webhook, us. */
function callerHtml(doc: Json, op: Json, webhook: boolean): string {
  if (webhook) return 'Sent by the service to your endpoint, signed per Standard Webhooks: verify the signature';
  if (op['x-required-scope']) return `Permission: <code>${esc(op['x-required-scope'])}</code>`;
  if ('x-required-scope' in op) return 'Permission: any valid key';
  const schemes = ((doc.security as Json[] | undefined) ?? []).flatMap((r) => Object.keys(r));
  return `Authorization: ${schemes.map((s) => `<code>${esc(s)}</code>`).join(', ')}`;
}

function operationHtml(doc: Json, method: string, path: string, op: Json, webhook = false): string {
  const id = esc(op.operationId);
  const params = ((op.parameters as unknown[]) ?? []).map((p) => resolve(doc, p));
  const body = (op.requestBody as Json | undefined)?.content as Json | undefined;
  const json = body?.['application/json'] as Json | undefined;
  const responses = Object.entries((op.responses as Json) ?? {}).map(([status, r]) => {
    const res = resolve(doc, r);
    const content = res.content as Json | undefined;
    const media = content ? (Object.values(content)[0] as Json) : undefined;
    const schema = media?.schema;
    const codes = ((((schema as Json | undefined)?.allOf as Json[] | undefined)?.[1]?.properties as Json | undefined)?.code as Json | undefined)?.enum as string[] | undefined;
    const headers = Object.keys((res.headers as Json | undefined) ?? {}).filter((h) => h !== 'X-Request-Id');
    return `<tr><td class="st s${esc(status[0])}">${esc(status)}</td><td>${text(String(res.description).split('\n')[0])}${
      codes ? `<div>${codes.map((c) => `<a href="#error-${esc(c)}"><code>${esc(c)}</code></a>`).join(' ')}</div>` : ''
    }${headers.length ? `<div class="meta">Headers: ${headers.map((h) => `<code>${esc(h)}</code>`).join(' ')}</div>` : ''}${
      schema && !codes ? `<details><summary>schema</summary>${pre(schema)}</details>` : ''
    }${media?.example !== undefined && !codes ? `<details><summary>example</summary>${pre(media.example)}</details>` : ''}</td></tr>`;
  });
  return `<section class="op" id="${id}">
<h3><span class="m ${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code> — ${esc(op.summary)}</h3>
${op.description ? `<p>${text(op.description)}</p>` : ''}
<p class="meta">${callerHtml(doc, op, webhook)}${op['x-rate-limited'] ? ' · rate-limited' : ''} · operationId <code>${id}</code></p>
${params.length ? `<h4>Parameters</h4><table>${params.map((p) => `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}${p.required ? ', required' : ''}</td><td>${text(p.description ?? '')}</td></tr>`).join('')}</table>` : ''}
${json ? `<h4>Request body</h4><details open><summary>schema</summary>${pre(json.schema)}</details>${json.example !== undefined ? `<details><summary>example</summary>${pre(json.example)}</details>` : ''}` : ''}
<h4>Responses</h4><table>${responses.join('')}</table>
</section>`;
}

function schemaHtml(name: string, schema: Json): string {
  const values = schema.enum as unknown[] | undefined;
  return `<section class="op" id="schema-${esc(name)}"><h3><code>${esc(name)}</code></h3>${schema.description ? `<p>${text(schema.description)}</p>` : ''}${
    values ? `<p>${values.map((v) => `<code>${esc(v)}</code>`).join(' ')}</p>` : pre(schema)
  }</section>`;
}

export function renderDocsPage(doc: Json): string {
  const info = (doc.info as Json) ?? {};
  const servers = (doc.servers as Json[] | undefined) ?? [];
  // The document lives beside the API (`<server path>/openapi.json`); the link is host-relative so it
  // works whatever host name the page was reached by.
  const docUrl = servers.length ? `${new URL(String(servers[0].url), 'http://x').pathname.replace(/\/$/, '')}/openapi.json` : undefined;
  const byTag = new Map<string, string[]>();
  const toc: string[] = [];
  for (const [path, item] of Object.entries((doc.paths as Json) ?? {})) {
    for (const [method, op] of Object.entries(item as Json)) {
      const o = op as Json;
      const tag = ((o.tags as string[] | undefined) ?? ['other'])[0];
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag)!.push(operationHtml(doc, method, path, o));
      toc.push(`<li><a href="#${esc(o.operationId)}"><span class="m ${esc(method)}">${esc(method.toUpperCase())}</span> ${esc(path)}</a></li>`);
    }
  }
  const events = Object.entries((doc.webhooks as Json | undefined) ?? {}).map(([type, item]) => {
    const o = (item as Json).post as Json;
    toc.push(`<li><a href="#${esc(o.operationId)}"><span class="m post">EVENT</span> ${esc(type)}</a></li>`);
    return operationHtml(doc, 'post', type, o, true);
  });
  const tagInfo = new Map(((doc.tags as Json[] | undefined) ?? []).map((t) => [String(t.name), String(t.description ?? '')]));
  const problem = resolve(doc, { $ref: '#/components/schemas/Problem' });
  const codes = (((problem.properties as Json | undefined)?.code as Json | undefined)?.enum as string[] | undefined) ?? [];
  const catalog = (doc['x-error-codes'] as Record<string, { status?: number; description?: string }> | undefined) ?? {};
  const schemas = Object.entries(((doc.components as Json | undefined)?.schemas as Json | undefined) ?? {}).filter(([name]) => name !== 'Problem');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(info.title)} ${esc(info.version)}</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0;display:flex;color:#1d232a}
nav{width:300px;flex:none;height:100vh;overflow:auto;position:sticky;top:0;background:#f5f6f8;padding:16px;box-sizing:border-box;font-size:13px}
nav ul{list-style:none;padding:0} nav a{color:inherit;text-decoration:none;display:block;padding:2px 0}
main{padding:24px 40px;max-width:980px;flex:1;min-width:0;overflow-wrap:anywhere} code,pre{font-family:ui-monospace,monospace;font-size:13px}
pre{background:#f5f6f8;padding:10px;overflow:auto;max-height:420px} .op{border-top:1px solid #dde;padding-top:8px;margin-top:24px}
.m{display:inline-block;min-width:52px;font-weight:600;font-size:12px}.get{color:#1565c0}.post{color:#2e7d32}.put,.patch{color:#ef6c00}.delete{color:#c62828}
table{border-collapse:collapse;width:100%}td{border-bottom:1px solid #eee;padding:4px 8px;vertical-align:top}
.st{font-weight:600;width:60px}.s2{color:#2e7d32}.s4{color:#c62828}.s5{color:#6a1b9a}.meta{color:#555}
</style></head><body>
<nav><strong>${esc(info.title)}</strong> <small>${esc(info.version)}</small><ul>${toc.join('')}</ul>${docUrl ? `<p><a href="${esc(docUrl)}">openapi.json</a></p>` : ''}</nav>
<main>
<h1>${esc(info.title)}</h1>
<p>${text(info.description)}</p>
${servers.length ? `<p>Base URL: <code>${esc(servers[0].url)}</code> · OpenAPI ${esc(doc.openapi)}${docUrl ? `: <a href="${esc(docUrl)}">openapi.json</a>` : ''}</p>` : ''}
${[...byTag].map(([tag, ops]) => `<h2>${esc(tag)}</h2><p>${text(tagInfo.get(tag) ?? '')}</p>${ops.join('\n')}`).join('\n')}
${events.length ? `<h2 id="webhook-events">Webhook events</h2><p>What your endpoint receives (register it with POST /webhooks): one POST per event, at least once.</p>${events.join('\n')}` : ''}
<h2 id="schemas">Schemas</h2><p>Named schemas the operations refer to. An enum lists every value a field can have today; a later release may add one.</p>
${schemas.map(([name, raw]) => schemaHtml(name, raw as Json)).join('\n')}
<h2 id="errors">Errors</h2><p>Every error is RFC 9457 <code>application/problem+json</code>; its <code>type</code> points to the code's row below.</p><div id="schema-Problem">${pre(problem)}</div>
<table>${codes.map((c) => `<tr id="error-${esc(c)}"><td><code>${esc(c)}</code></td><td class="st s${esc(String(catalog[c]?.status ?? '')[0])}">${esc(catalog[c]?.status ?? '')}</td><td>${text(catalog[c]?.description ?? '')}</td></tr>`).join('')}</table>
</main></body></html>`;
}
