// grpc-js service definitions built from our generated protobufjs classes: one table used by
// the control-plane client (gateway/upstream) and by the reference backend, so both speak the
// exact contract of proto/*.proto. (grpc-js's proto-loader would parse the .proto again at
// start-up and produce a second, differently shaped object model; we keep one.)
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import { inference, grpc as grpcHealth } from './generated/inference';

/** What a generated message class offers that a gRPC method needs. */
interface MessageCodec<In, Out extends In> {
  encode(message: In): { finish(): Uint8Array };
  decode(bytes: Uint8Array): Out;
}

/**
 * A grpc-js method definition that also remembers the decoded (class) types, so callers see
 * full messages on receipt while sending plain objects: `In` is what encode accepts, `Out`
 * what decode returns.
 */
export interface Method<ReqIn, ReqOut extends ReqIn, ResIn, ResOut extends ResIn> extends MethodDefinition<ReqIn, ResIn> {
  readonly decodeRequest: (bytes: Uint8Array) => ReqOut;
  readonly decodeResponse: (bytes: Uint8Array) => ResOut;
}

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function method<ReqIn, ReqOut extends ReqIn, ResIn, ResOut extends ResIn>(
  path: string,
  request: MessageCodec<ReqIn, ReqOut>,
  response: MessageCodec<ResIn, ResOut>,
  streaming = false,
): Method<ReqIn, ReqOut, ResIn, ResOut> {
  return {
    path,
    requestStream: streaming,
    responseStream: streaming,
    requestSerialize: (m: ReqIn) => toBuffer(request.encode(m).finish()),
    requestDeserialize: (b: Buffer) => request.decode(b),
    responseSerialize: (m: ResIn) => toBuffer(response.encode(m).finish()),
    responseDeserialize: (b: Buffer) => response.decode(b),
    decodeRequest: (b: Uint8Array) => request.decode(b),
    decodeResponse: (b: Uint8Array) => response.decode(b),
  };
}

const I = inference;
const P = '/inference.GRPCInferenceService/';

export const inferenceService = {
  ServerLive: method(`${P}ServerLive`, I.ServerLiveRequest, I.ServerLiveResponse),
  ServerReady: method(`${P}ServerReady`, I.ServerReadyRequest, I.ServerReadyResponse),
  ModelReady: method(`${P}ModelReady`, I.ModelReadyRequest, I.ModelReadyResponse),
  ServerMetadata: method(`${P}ServerMetadata`, I.ServerMetadataRequest, I.ServerMetadataResponse),
  ModelMetadata: method(`${P}ModelMetadata`, I.ModelMetadataRequest, I.ModelMetadataResponse),
  ModelInfer: method(`${P}ModelInfer`, I.ModelInferRequest, I.ModelInferResponse),
  ModelStreamInfer: method(`${P}ModelStreamInfer`, I.ModelInferRequest, I.ModelStreamInferResponse, true),
  ModelConfig: method(`${P}ModelConfig`, I.ModelConfigRequest, I.ModelConfigResponse),
  ModelStatistics: method(`${P}ModelStatistics`, I.ModelStatisticsRequest, I.ModelStatisticsResponse),
  RepositoryIndex: method(`${P}RepositoryIndex`, I.RepositoryIndexRequest, I.RepositoryIndexResponse),
  RepositoryModelLoad: method(`${P}RepositoryModelLoad`, I.RepositoryModelLoadRequest, I.RepositoryModelLoadResponse),
  RepositoryModelUnload: method(`${P}RepositoryModelUnload`, I.RepositoryModelUnloadRequest, I.RepositoryModelUnloadResponse),
  SystemSharedMemoryStatus: method(`${P}SystemSharedMemoryStatus`, I.SystemSharedMemoryStatusRequest, I.SystemSharedMemoryStatusResponse),
  SystemSharedMemoryRegister: method(`${P}SystemSharedMemoryRegister`, I.SystemSharedMemoryRegisterRequest, I.SystemSharedMemoryRegisterResponse),
  SystemSharedMemoryUnregister: method(`${P}SystemSharedMemoryUnregister`, I.SystemSharedMemoryUnregisterRequest, I.SystemSharedMemoryUnregisterResponse),
  CudaSharedMemoryStatus: method(`${P}CudaSharedMemoryStatus`, I.CudaSharedMemoryStatusRequest, I.CudaSharedMemoryStatusResponse),
  CudaSharedMemoryRegister: method(`${P}CudaSharedMemoryRegister`, I.CudaSharedMemoryRegisterRequest, I.CudaSharedMemoryRegisterResponse),
  CudaSharedMemoryUnregister: method(`${P}CudaSharedMemoryUnregister`, I.CudaSharedMemoryUnregisterRequest, I.CudaSharedMemoryUnregisterResponse),
  TraceSetting: method(`${P}TraceSetting`, I.TraceSettingRequest, I.TraceSettingResponse),
  LogSettings: method(`${P}LogSettings`, I.LogSettingsRequest, I.LogSettingsResponse),
} satisfies ServiceDefinition;

const H = grpcHealth.health.v1;
export const healthService = {
  Check: method('/grpc.health.v1.Health/Check', H.HealthCheckRequest, H.HealthCheckResponse),
} satisfies ServiceDefinition;

export { inference, grpcHealth };
