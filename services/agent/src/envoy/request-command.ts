import { parseSettings } from "@sextant/runtime";
import { agentSettings } from "../settings.js";

/** Where `agent request` sends by default: Envoy's admin API, as pilot-agent's. */
const DEFAULT_DEBUG_PORT = 15000;
/** pilot-agent's allowed ports: Envoy's admin, Envoy's readiness listener, the status port, the debug port. */
const ISTIO_ALLOWED_PORTS = [15000, 15004, 15020, 15021];

/** How `agent request` writes and where it reads its settings. */
export interface RequestIo {
  env: NodeJS.ProcessEnv;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

/**
 * The ports this pod's agent and Envoy really use (HTTP_PORT, PROXY_CONFIG's
 * proxyAdminPort), which may differ from Istio's defaults; none when the
 * settings do not parse (the fixed list still applies).
 */
function configuredPorts(env: NodeJS.ProcessEnv): number[] {
  try {
    const settings = parseSettings(agentSettings, env);
    return [settings.HTTP_PORT, settings.PROXY_CONFIG.proxyAdminPort];
  } catch {
    return [];
  }
}

/**
 * `agent request [--debug-port N] <method> <path> [<body>]`: pilot-agent's
 * `request`, a local HTTP request to Envoy's admin API or the agent's status
 * port, as the native sidecar's preStop hook runs it (`POST drain`). The
 * answer's body goes to stdout; a status above 399 other than 404 fails
 * (exit 1), as Istio's. Returns the exit status.
 */
export async function runRequestCommand(argv: string[], io: RequestIo): Promise<number> {
  let port = DEFAULT_DEBUG_PORT;
  const positionals: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    const word = argv[index]!;
    const flag = /^--debug-port(?:=(.*))?$/.exec(word);
    if (!flag) {
      positionals.push(word);
      continue;
    }
    const value = flag[1] ?? argv[++index];
    if (!value || !/^\d+$/.test(value)) {
      io.stderr(`agent request: --debug-port takes a port number (got "${value ?? ""}")\n`);
      return 2;
    }
    port = Number(value);
  }
  const [method, path, body] = positionals;
  if (!method || !path || positionals.length > 3) {
    io.stderr("usage: agent request [--debug-port <port>] <method> <path> [<body>]\n");
    return 2;
  }
  const allowed = [...new Set([...ISTIO_ALLOWED_PORTS, ...configuredPorts(io.env)])].sort((a, b) => a - b);
  if (!allowed.includes(port)) {
    io.stderr(`agent request: debug port ${port} is not in allowed list [${allowed.join(" ")}]\n`);
    return 2;
  }
  let answer: Response;
  try {
    answer = await fetch(`http://127.0.0.1:${port}/${path.replace(/^\//, "")}`, {
      method: method.toUpperCase(),
      body: body === undefined || method.toUpperCase() === "GET" ? undefined : body,
      signal: AbortSignal.timeout(60_000),
    });
  } catch (error) {
    io.stderr(`agent request: ${(error as Error).message}\n`);
    return 1;
  }
  const text = await answer.text();
  if (answer.status > 399 && answer.status !== 404) {
    io.stderr(`agent request: received unsuccessful status code ${answer.status}: ${text}\n`);
    return 1;
  }
  io.stdout(`${text}\n`);
  return 0;
}
