/** One problem found in a resource: where it is and what is wrong. */
export interface FieldError {
  /** Dotted path from the document root, e.g. `spec.http[0].route[1].weight`. */
  path: string;
  /** A sentence a user can act on. */
  message: string;
}

/** The outcome of validating one resource: errors reject it, warnings do not. */
export interface ValidationResult {
  errors: FieldError[];
  warnings: FieldError[];
}

/**
 * A collector of errors and warnings that rules append to, so that one pass
 * reports every problem instead of stopping at the first.
 */
export class Issues {
  readonly errors: FieldError[] = [];
  readonly warnings: FieldError[] = [];

  /** Records a problem that makes the resource invalid. */
  error(path: string, message: string): void {
    this.errors.push({ path, message });
  }

  /** Records a problem that Istio accepts but the user should know about. */
  warn(path: string, message: string): void {
    this.warnings.push({ path, message });
  }

  /** The collected issues as a plain result object. */
  result(): ValidationResult {
    return { errors: [...this.errors], warnings: [...this.warnings] };
  }
}

/** The path of a list element: `items[3]`. */
export function at(path: string, index: number): string {
  return `${path}[${index}]`;
}

/**
 * The path of a map entry. Keys often contain dots or slashes (header names,
 * label keys), so they are bracketed rather than dotted: `selector[app]`.
 */
export function key(path: string, mapKey: string): string {
  return `${path}[${mapKey}]`;
}
