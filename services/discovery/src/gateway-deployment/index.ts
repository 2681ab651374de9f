// What deploy's tests render a deployed Gateway with: the pure render function, and discovery's settings
// (as its Deployment sets them) turned into its input.
export { discoverySettings } from "../settings.js";
export { gatewayDeploymentSettings, type KubeGateway, renderGatewayDeployment } from "./render.js";
