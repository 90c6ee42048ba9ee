// Validates Kubernetes objects (a JSON array on stdin) offline against the OpenAPI schemas of
// kubernetes-models (core groups) and @kubernetes-models/prometheus-operator (monitoring.coreos.com).
// Prints one line per object; exits 1 if any is invalid or of a kind without a schema.
// usage: node validate.mjs < objects.json   (NODE_PATH-free: run from the directory holding node_modules)
import { readFileSync } from "node:fs";

const objects = JSON.parse(readFileSync(0, "utf8"));
let bad = 0;
for (const object of objects) {
  const [group, version] = object.apiVersion.includes("/") ? object.apiVersion.split("/") : ["", object.apiVersion];
  const module = group === "monitoring.coreos.com" ? `@kubernetes-models/prometheus-operator/${group}/${version}`
               : group === "" ? `kubernetes-models/${version}` : `kubernetes-models/${group}/${version}`;
  const name = `${object.kind}/${object.metadata?.name}`;
  let models;
  try {
    models = await import(module);
  } catch (e) {
    console.log(`NO SCHEMA ${object.apiVersion} ${name}: ${e.message.split("\n")[0]}`);
    bad++;
    continue;
  }
  const Model = models[object.kind];
  if (!Model) {
    console.log(`NO SCHEMA ${object.apiVersion} ${name}: no kind ${object.kind} in ${module}`);
    bad++;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`valid ${object.apiVersion} ${name}`);
  } catch (e) {
    console.log(`INVALID ${object.apiVersion} ${name}: ${e.message}`);
    bad++;
  }
}
process.exit(bad ? 1 : 0);
