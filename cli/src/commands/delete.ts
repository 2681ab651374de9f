import type { Command } from "commander";
import { action, CommandError, exitOnUsageError, IngestClient } from "../ingest-client.js";
import { qualifiedName, resolveKind } from "../kinds.js";
import { configPath } from "./apply.js";

/** `sextantctl delete KIND NAME -n NS`: deletes a stored resource (and its status). */
export function registerDelete(program: Command): void {
  program
    .command("delete")
    .description("delete a stored resource")
    .argument("<kind>", "the kind: VirtualService, virtualservices, vs, ...")
    .argument("<name>", "the resource's name")
    .option("-n, --namespace <namespace>", "the namespace", "default")
    .addHelpText("after", "\nExit codes: 0 deleted, 1 not found/refused/unreachable, 2 usage.")
    .exitOverride(exitOnUsageError)
    .action(
      action(async (kindName: string, name: string, flags: { namespace: string }) => {
        const kind = resolveKind(kindName);
        const ref = { kind: kind.kind, namespace: flags.namespace, name };
        const { status, json } = await new IngestClient(program).request("DELETE", configPath(ref));
        if (status === 404)
          throw new CommandError(
            `${kind.plural}.${kind.group} "${name}" not found in namespace "${flags.namespace}"`,
          );
        if (status !== 200) throw new CommandError(`ingest answered ${status}: ${json.error}`);
        const [qualifiedKind] = qualifiedName(kind.kind, name).split("/");
        console.log(`${qualifiedKind} "${name}" deleted`);
      }),
    );
}
