// The gRPC pass-through's suite (grpc-passthrough.test.ts) on the gRPC port's own HTTP/2 server
// (ingress/grpc-port/) instead of node:http2's: every call, status, limit, deadline and cancel the
// same. The suite is loaded after the switch (require, not import: imports are hoisted).
import { serveOnGrpcPort } from '../support/grpc-server';

serveOnGrpcPort();
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('./grpc-passthrough.test');
