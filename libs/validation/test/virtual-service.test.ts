import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { headerValueProblem, MAX_HEADER_BYTES, regexProblem, validateResource } from "../src/index.js";

function directResponse(body: string) {
  return validateResource({
    apiVersion: "networking.istio.io/v1",
    kind: "VirtualService",
    metadata: { name: "a", namespace: "default" },
    spec: { hosts: ["r"], http: [{ directResponse: { status: 200, body: { string: body } } }] },
  });
}

describe("VirtualService rules", () => {
  it("takes a redirect prefixRewrite on prefix matches only, and not with uri (Istio's validateHTTPRedirect)", () => {
    const redirect = (match: object[], redirect: object) =>
      validateResource({
        apiVersion: "networking.istio.io/v1",
        kind: "VirtualService",
        metadata: { name: "a", namespace: "default" },
        spec: { hosts: ["r"], http: [{ match, redirect }] },
      }).errors.map((e) => e.message);
    assert.deepEqual(redirect([{ uri: { prefix: "/old" } }], { prefixRewrite: "/new" }), []);
    assert.deepEqual(redirect([{ uri: { exact: "/old" } }], { prefixRewrite: "/new" }), [
      "redirect prefixRewrite requires every uri match to be a prefix match",
    ]);
    assert.deepEqual(redirect([], { uri: "/a", prefixRewrite: "/new" }), [
      "redirect may only specify one of uri or prefixRewrite",
    ]);
  });

  it("takes a direct response body up to 1 MiB, warns above 100 KiB, refuses more (Istio's limits)", () => {
    assert.deepEqual(directResponse("x".repeat(100 * 1024)).warnings, []);
    const large = directResponse("x".repeat(100 * 1024 + 1));
    assert.deepEqual(large.errors, []);
    assert.deepEqual(
      large.warnings.map((w) => w.path),
      ["spec.http[0].directResponse.body"],
    );
    assert.deepEqual(directResponse("x".repeat(1024 * 1024)).errors, []);
    // Bytes, not characters: "é" is two bytes in UTF-8.
    const tooLarge = directResponse("é".repeat(512 * 1024 + 1));
    assert.deepEqual(
      tooLarge.errors.map((e) => e.path),
      ["spec.http[0].directResponse.body"],
    );
    assert.match(tooLarge.errors[0]!.message, /at most 1 MiB/);
  });

  it("names why a pseudo-header cannot be modified", () => {
    const result = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "a", namespace: "default" },
      spec: {
        hosts: ["r"],
        http: [{ headers: { request: { set: { ":path": "/x" } } }, route: [{ destination: { host: "r" } }] }],
      },
    });
    assert.equal(result.errors.length, 1);
    assert.match(result.errors[0]!.message, /":path" cannot be modified: ":"-prefixed pseudo-headers/);
  });

  it("refuses header values Istio or Envoy refuse: lone %, bad commands, control characters, over 16 KiB", () => {
    for (const ok of [
      "",
      "plain",
      "100%%",
      "%HOSTNAME%",
      "prefix %DOWNSTREAM_REMOTE_ADDRESS% suffix",
      "%REQ(x-b)%%%",
      "%START_TIME(%Y-%m-%d)%",
      "%REQ:10%",
      '%UPSTREAM_METADATA(["istio", "x"])%',
      "tab\there",
      "x".repeat(MAX_HEADER_BYTES),
    ]) {
      assert.equal(headerValueProblem(ok), undefined, JSON.stringify(ok));
    }
    const refused: Array<[string, RegExp]> = [
      ["50%", /unescaped "%" at position 2/],
      ["abc%123", /unterminated variable at position 3/],
      ["%START_TIME%%", /unescaped "%" at position 12/],
      ["%hostname%", /no valid %COMMAND% at position 0/],
      ["%A B%", /no valid %COMMAND% at position 0/],
      // Istio wants the closing % right after the arguments; Envoy would take a length.
      ["%REQ(x):10%", /expected "%" at position 7/],
      ['%UPSTREAM_METADATA(["a" "b"])%', /expected ",", "]" or a space at position 24/],
      ["a\nb", /control characters \(found \\x0a at position 1\)/],
      ["a\u0000", /control characters/],
      ["del\u007f", /control characters/],
      ["x".repeat(MAX_HEADER_BYTES + 1), /16385 bytes; Envoy takes at most 16384/],
      // Bytes, not characters.
      ["é".repeat(MAX_HEADER_BYTES / 2 + 1), /16386 bytes/],
    ];
    for (const [value, reason] of refused) {
      assert.match(headerValueProblem(value) ?? "", reason, JSON.stringify(value.slice(0, 40)));
    }
  });

  it("names the header operation whose value or name Envoy would refuse", () => {
    const result = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "a", namespace: "default" },
      spec: {
        hosts: ["r"],
        http: [
          {
            headers: {
              request: { set: { "x-a": "50%", ["x".repeat(MAX_HEADER_BYTES + 1)]: "1" } },
              response: { add: { "x-b": "x".repeat(MAX_HEADER_BYTES + 1) }, remove: [""] },
            },
            route: [{ destination: { host: "r" } }],
          },
        ],
      },
    });
    assert.deepEqual(
      result.errors.map((e) => [e.path.slice(0, 60), e.message.slice(0, 40)]),
      [
        ["spec.http[0].headers.request.set[x-a]", 'unescaped "%" at position 2 (a literal %'],
        [`spec.http[0].headers.request.set[${"x".repeat(27)}`, "header name is 16385 bytes; Envoy takes "],
        ["spec.http[0].headers.response.add[x-b]", "header value is 16385 bytes; Envoy takes"],
        ["spec.http[0].headers.response.remove[0]", "header name cannot be empty"],
      ],
    );
  });

  it("checks regexes as Envoy does: RE2 syntax, not empty, at most 1024 characters", () => {
    assert.equal(regexProblem("^/api/v[0-9]+$"), undefined);
    assert.match(regexProblem("(?=admin).*") ?? "", /not a valid RE2/);
    assert.match(regexProblem("") ?? "", /must not be empty/);
    assert.equal(regexProblem("a".repeat(1024)), undefined);
    assert.match(regexProblem("a".repeat(1025)) ?? "", /too large/);
  });
});
