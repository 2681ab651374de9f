import { z } from "zod";

/**
 * A setting that holds JSON (Istio passes several such through the pod's
 * environment): unset or blank is undefined; text that is not JSON, or JSON
 * that does not match `schema`, stops the start with each problem named by
 * its path in the value.
 */
export function jsonSetting<Schema extends z.ZodTypeAny>(schema: Schema) {
  return z
    .string()
    .optional()
    .transform((text, ctx): z.infer<Schema> | undefined => {
      if (text === undefined || text.trim() === "") return undefined;
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (error) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: `not JSON: ${(error as Error).message}` });
        return z.NEVER;
      }
      const result = schema.safeParse(parsed);
      if (!result.success) {
        for (const issue of result.error.issues)
          ctx.addIssue({
            code: z.ZodIssueCode.custom,
            message: issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message,
          });
        return z.NEVER;
      }
      return result.data;
    });
}
