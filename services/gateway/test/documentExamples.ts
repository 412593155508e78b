import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

type Json = Record<string, unknown>;

const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** A header's or query parameter's example given as text, as the JSON type its schema has. */
function typed(value: unknown, schema: Json): unknown {
  if (typeof value !== 'string') return value;
  const types = ([] as unknown[]).concat(schema.type ?? []);
  if ((types.includes('integer') || types.includes('number')) && !Number.isNaN(Number(value))) return Number(value);
  return value;
}

/**
 * Every place of an OpenAPI document that must carry an example — each request body, parameter,
 * response body and response header of every operation and webhook — and what is wrong with it: missing, or not
 * valid against its schema (ajv, JSON Schema 2020-12, formats checked). Empty = all present and valid.
 */
export function exampleProblems(doc: Json): string[] {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  addFormats(ajv);
  ajv.addSchema(doc, 'doc');
  const resolve = (node: unknown): { node: Json; pointer?: string } => {
    let n = node as Json;
    let pointer: string | undefined;
    for (let i = 0; i < 10 && n && typeof n.$ref === 'string'; i++) {
      pointer = (n.$ref as string).slice(1);
      n = (n.$ref as string).slice(2).split('/').map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~')).reduce<unknown>((o, k) => (o as Json)?.[k], doc) as Json;
    }
    return { node: n ?? {}, pointer };
  };
  const problems: string[] = [];
  const check = (where: string, schemaPointer: string, example: unknown, schema: Json) => {
    if (example === undefined) {
      problems.push(`${where}: no example`);
      return;
    }
    const validate = ajv.compile({ $ref: `doc#${schemaPointer}` });
    if (!validate(typed(example, schema))) problems.push(`${where}: example does not match its schema: ${ajv.errorsText(validate.errors)}`);
  };
  const operations = [
    ...Object.entries((doc.paths as Json) ?? {}).map(([path, item]) => ['paths', path, item] as const),
    ...Object.entries((doc.webhooks as Json) ?? {}).map(([event, item]) => ['webhooks', event, item] as const),
  ];
  for (const [section, path, item] of operations) {
    for (const [method, raw] of Object.entries(item as Json)) {
      const op = raw as Json;
      const at = `/${section}/${escape(path)}/${method}`;
      const name = `${section === 'webhooks' ? 'webhook ' : ''}${method.toUpperCase()} ${path}`;
      ((op.parameters as unknown[] | undefined) ?? []).forEach((p, i) => {
        const { node, pointer } = resolve(p);
        check(`${name} parameter ${String(node.name)}`, `${pointer ?? `${at}/parameters/${i}`}/schema`, node.example, node.schema as Json);
      });
      const body = (op.requestBody as Json | undefined)?.content as Json | undefined;
      for (const [type, media] of Object.entries(body ?? {})) check(`${name} request body`, `${at}/requestBody/content/${escape(type)}/schema`, (media as Json).example, (media as Json).schema as Json);
      for (const [status, response] of Object.entries((op.responses as Json) ?? {})) {
        const { node: res } = resolve(response);
        for (const [type, media] of Object.entries((res.content as Json | undefined) ?? {})) {
          check(`${name} → ${status} ${type}`, `${at}/responses/${status}/content/${escape(type)}/schema`, (media as Json).example, (media as Json).schema as Json);
        }
        for (const [header, h] of Object.entries((res.headers as Json | undefined) ?? {})) {
          const { node, pointer } = resolve(h);
          check(`${name} → ${status} header ${header}`, `${pointer ?? `${at}/responses/${status}/headers/${escape(header)}`}/schema`, node.example, node.schema as Json);
        }
      }
    }
  }
  return problems;
}
