export * from "./grpc-app.js";
