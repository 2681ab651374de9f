import * as k8s from "@kubernetes/client-node";

interface Attribute {
  readonly baseName: string;
  readonly type: string;
}

type Model = { getAttributeTypeMap(): Attribute[] };

/**
 * Checks a Kubernetes object against the API schema as @kubernetes/client-node's
 * generated models encode it: every field must exist on its type (by its
 * wire name), and values must have the declared shape (objects, arrays,
 * string maps, strings, numbers, booleans). Returns every problem with its
 * path; an empty list means the object fits the schema. int-or-string and
 * free-form fields (type "any", "object") accept anything.
 */
export function schemaProblems(value: unknown, type: string, path = ""): string[] {
  if (value === undefined || value === null) return [];
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (!Array.isArray(value)) return [`${path}: expected a list`];
    return value.flatMap((item, index) => schemaProblems(item, array[1]!, `${path}[${index}]`));
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (typeof value !== "object" || Array.isArray(value)) return [`${path}: expected a map`];
    return Object.entries(value).flatMap(([key, item]) => schemaProblems(item, map[1]!, `${path}[${key}]`));
  }
  switch (type) {
    case "string":
      return typeof value === "string" ? [] : [`${path}: expected a string`];
    case "number":
      return typeof value === "number" ? [] : [`${path}: expected a number`];
    case "boolean":
      return typeof value === "boolean" ? [] : [`${path}: expected a boolean`];
    case "Date":
      return typeof value === "string" ? [] : [`${path}: expected a timestamp`];
    case "IntOrString":
    case "any":
    case "object":
      return [];
  }
  const model = (k8s as unknown as Record<string, Model | undefined>)[type];
  if (!model?.getAttributeTypeMap) return [`${path}: no schema for type ${type}`];
  if (typeof value !== "object" || Array.isArray(value)) return [`${path}: expected an object of ${type}`];
  const attributes = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a]));
  return Object.entries(value).flatMap(([key, item]) => {
    const attribute = attributes.get(key);
    const at = path ? `${path}.${key}` : key;
    return attribute ? schemaProblems(item, attribute.type, at) : [`${at}: not a field of ${type}`];
  });
}
