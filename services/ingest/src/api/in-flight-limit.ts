import { Counter, Gauge, type Registry } from "@sextant/observability";
import type { NextFunction, Request, Response } from "express";

/** Seconds a refused client is told to wait (kube-apiserver's max-in-flight filter says 1 too). */
const RETRY_AFTER_SECONDS = 1;

/**
 * Express middleware that bounds the config API's requests in flight
 * (MAX_REQUESTS_IN_FLIGHT), as kube-apiserver's `--max-requests-inflight`
 * does: a request beyond the limit is answered 429 with `Retry-After` at
 * once, before its token is reviewed or its body read, instead of waiting in
 * an unbounded queue of sockets, bodies and KV round trips. A request holds
 * its place from its arrival until its response is sent or its connection
 * closes, so the limit also bounds the bodies held in memory (at most
 * `max` × MAX_BODY_BYTES).
 */
export function inFlightLimit(max: number, registry: Registry) {
  const inFlight = new Gauge({
    name: "sextant_ingest_api_requests_in_flight",
    help: "Config API requests being served (MAX_REQUESTS_IN_FLIGHT bounds them).",
    registers: [registry],
  });
  const refused = new Counter({
    name: "sextant_ingest_api_overload_refusals_total",
    help: "Config API requests answered 429 because MAX_REQUESTS_IN_FLIGHT were already being served.",
    registers: [registry],
  });
  let current = 0;
  return (_request: Request, response: Response, next: NextFunction): void => {
    if (current >= max) {
      refused.inc();
      response
        .status(429)
        .set("Retry-After", String(RETRY_AFTER_SECONDS))
        .json({
          error: `ingest is overloaded: ${max} requests are in flight (MAX_REQUESTS_IN_FLIGHT); nothing was done, retry after ${RETRY_AFTER_SECONDS} s`,
          reason: "overloaded",
        });
      return;
    }
    current++;
    inFlight.set(current);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      current--;
      inFlight.set(current);
    };
    // "close" follows "finish" on a served request and alone on an aborted one.
    response.once("finish", release);
    response.once("close", release);
    next();
  };
}
