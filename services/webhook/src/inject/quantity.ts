/** Multipliers of Kubernetes quantity suffixes. */
const SUFFIXES: Readonly<Record<string, number>> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes resource quantity (100m, 1.5, 128Mi, 2e3) as a number; NaN when it is not one. */
export function quantityValue(quantity: string): number {
  const match = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|([KMGTPE]i|[numkMGTPE]))?$/.exec(
    quantity.trim(),
  );
  if (!match) return Number.NaN;
  const [, number, exponent, suffix = ""] = match;
  return Number(number) * (exponent ? 10 ** Number(exponent.slice(1)) : SUFFIXES[suffix]!);
}

/** Negative, zero or positive as a is less than, equal to or more than b. */
export function compareQuantities(a: string, b: string): number {
  return Math.sign(quantityValue(a) - quantityValue(b));
}
