// Validates every document of deploy/k8s/*.yaml against the Kubernetes API's JSON schemas (kubernetes-models:
// wrong types, formats and missing required fields are errors) and against the API's field lists
// (@kubernetes/client-node's models: a field the API does not have, such as a misspelt probe, is an error), checks the InferencePool's required fields
// (its CRD is not in kubernetes-models), and checks what ties the manifests to preface: every `--flag` of the
// container's args is one `preface serve --help` lists, the probes use /health and /livez, the grace period
// covers preStop plus --drain-seconds, and every Secret, Service and label selector named is defined.
// Usage: node validate_k8s.mjs DEPLOY_K8S_DIR SERVE_HELP_FILE
import fs from "node:fs";
import path from "node:path";
import YAML from "yaml";

const [dir, helpFile] = process.argv.slice(2);
const help = fs.readFileSync(helpFile, "utf8");
const errors = [];
const fail = (where, msg) => errors.push(`${where}: ${msg}`);

const docs = [];
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()) {
  for (const doc of YAML.parseAllDocuments(fs.readFileSync(path.join(dir, file), "utf8"))) {
    if (doc.errors.length) fail(file, doc.errors.map((e) => e.message).join("; "));
    const obj = doc.toJS();
    if (obj) docs.push({ file, obj });
  }
}

async function modelFor(apiVersion, kind) {
  const group = apiVersion.includes("/") ? apiVersion : `v1`;
  try {
    const mod = await import(`kubernetes-models/${group}/${kind}`);
    return mod[kind] ?? mod.default;
  } catch {
    return undefined;
  }
}

for (const { file, obj } of docs) {
  const where = `${file} ${obj.kind}/${obj.metadata?.name}`;
  if (obj.kind === "InferencePool") {
    const s = obj.spec ?? {};
    if (obj.apiVersion !== "inference.networking.k8s.io/v1") fail(where, `apiVersion ${obj.apiVersion}`);
    if (!s.selector?.matchLabels || !Object.keys(s.selector.matchLabels).length) fail(where, "spec.selector.matchLabels");
    if (!Array.isArray(s.targetPorts) || !s.targetPorts.every((p) => Number.isInteger(p.number))) fail(where, "targetPorts");
    if (!s.endpointPickerRef?.name || !Number.isInteger(s.endpointPickerRef?.port?.number)) fail(where, "endpointPickerRef");
    continue;
  }
  const Model = await modelFor(obj.apiVersion, obj.kind);
  if (!Model) {
    fail(where, `no schema for ${obj.apiVersion} ${obj.kind}`);
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    fail(where, e.message);
  }
}

// Unknown fields: walks `value` along the client library's attribute maps (type names as the generated models
// spell them: V1PodSpec, Array<V1Container>, { [key: string]: string; }, primitives).
const modelCache = new Map();
async function attributes(type) {
  if (!modelCache.has(type)) {
    try {
      const mod = await import(`@kubernetes/client-node/dist/gen/models/${type}.js`);
      modelCache.set(type, mod[type].getAttributeTypeMap());
    } catch {
      modelCache.set(type, null);
    }
  }
  return modelCache.get(type);
}
async function unknownFields(value, type, where) {
  if (value === null || value === undefined) return;
  if (type.startsWith("Array<")) {
    if (Array.isArray(value)) for (const [i, v] of value.entries()) await unknownFields(v, type.slice(6, -1), `${where}[${i}]`);
    return;
  }
  if (type.startsWith("{ [key: string]: ")) {
    const inner = type.slice(17, -3);
    for (const [k, v] of Object.entries(value)) await unknownFields(v, inner, `${where}.${k}`);
    return;
  }
  if (!/^V\d|^[A-Z][A-Za-z0-9]*V\d/.test(type) || typeof value !== "object") return;  // primitives, IntOrString
  const attrs = await attributes(type);
  if (!attrs) return;
  for (const [k, v] of Object.entries(value)) {
    const a = attrs.find((x) => x.baseName === k);
    if (!a) fail(where, `unknown field '${k}' (${type})`);
    else await unknownFields(v, a.type, `${where}.${k}`);
  }
}
for (const { file, obj } of docs) {
  if (obj.kind === "InferencePool") continue;
  const version = obj.apiVersion.split("/").pop();
  await unknownFields(obj, version.charAt(0).toUpperCase() + version.slice(1) + obj.kind, `${file} ${obj.kind}/${obj.metadata?.name}`);
}

const byKind = (kind) => docs.filter((d) => d.obj.kind === kind).map((d) => d.obj);
const labelsMatch = (sel, labels) => Object.entries(sel ?? {}).every(([k, v]) => labels?.[k] === v);
const pods = byKind("Deployment").map((d) => d.spec.template);
const secretsMade = new Set(["preface-redis", "preface-api-keys"]);  // created with kubectl (see the files' comments)
for (const svc of byKind("Service")) {
  if (!pods.some((p) => labelsMatch(svc.spec.selector, p.metadata.labels))) fail(`Service/${svc.metadata.name}`, "selects no pod");
}
for (const pdb of byKind("PodDisruptionBudget")) {
  if (!pods.some((p) => labelsMatch(pdb.spec.selector.matchLabels, p.metadata.labels))) fail(`PDB/${pdb.metadata.name}`, "selects no pod");
}
for (const pool of byKind("InferencePool")) {
  if (!pods.some((p) => labelsMatch(pool.spec.selector.matchLabels, p.metadata.labels))) fail(`InferencePool/${pool.metadata.name}`, "selects no pod");
}

const preface = byKind("Deployment").find((d) => d.metadata.name === "preface");
if (!preface) {
  fail("preface.yaml", "no Deployment named preface");
} else {
  const pod = preface.spec.template.spec;
  const c = pod.containers.find((x) => x.name === "preface");
  for (const a of c.args ?? []) {
    if (a.startsWith("--") && !new RegExp(`(^|[\\s,])${a.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}([\\s,=]|$)`, "m").test(help)) {
      fail("preface.yaml", `serve has no option ${a}`);
    }
  }
  for (const e of c.env ?? []) {
    if (e.name.startsWith("PREFACE_") && !help.includes(e.name)) fail("preface.yaml", `serve reads no ${e.name}`);
    const ref = e.valueFrom?.secretKeyRef?.name;
    if (ref && !secretsMade.has(ref)) fail("preface.yaml", `unknown Secret ${ref}`);
  }
  if (c.readinessProbe?.httpGet?.path !== "/health") fail("preface.yaml", "readiness is not /health");
  if (c.livenessProbe?.httpGet?.path !== "/livez") fail("preface.yaml", "liveness is not /livez");
  const arg = (name) => {
    const i = (c.args ?? []).indexOf(name);
    return i >= 0 ? Number(c.args[i + 1]) : undefined;
  };
  const drain = arg("--drain-seconds") ?? 20;
  const pre = c.lifecycle?.preStop?.exec?.command?.[0] === "sleep" ? Number(c.lifecycle.preStop.exec.command[1]) : 0;
  if (!(pod.terminationGracePeriodSeconds > drain + pre)) {
    fail("preface.yaml", `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} <= preStop ${pre} + drain ${drain}`);
  }
}

if (errors.length) {
  for (const e of errors) console.error(`FAIL ${e}`);
  process.exit(1);
}
console.log(`ok: ${docs.length} documents in ${dir}`);
