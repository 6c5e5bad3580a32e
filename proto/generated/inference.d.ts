import * as $protobuf from "protobufjs/minimal.js";
import Long = require("long");

/** Namespace inference. */
export namespace inference {

    /**
     * Properties of a ServerLiveRequest.
     * @deprecated Use inference.ServerLiveRequest.$Properties instead.
     */
    interface IServerLiveRequest extends inference.ServerLiveRequest.$Properties {
    }

    /** Represents a ServerLiveRequest. */
    class ServerLiveRequest {

        /**
         * Constructs a new ServerLiveRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ServerLiveRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new ServerLiveRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ServerLiveRequest instance
         */
        static create(properties: inference.ServerLiveRequest.$Shape): inference.ServerLiveRequest & inference.ServerLiveRequest.$Shape;
        static create(properties?: inference.ServerLiveRequest.$Properties): inference.ServerLiveRequest;

        /**
         * Encodes the specified ServerLiveRequest message. Does not implicitly {@link inference.ServerLiveRequest.verify|verify} messages.
         * @param message ServerLiveRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ServerLiveRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ServerLiveRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ServerLiveRequest & inference.ServerLiveRequest.$Shape} ServerLiveRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ServerLiveRequest & inference.ServerLiveRequest.$Shape;

        /**
         * Creates a ServerLiveRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ServerLiveRequest
         */
        static fromObject(object: { [k: string]: any }): inference.ServerLiveRequest;

        /**
         * Creates a plain object from a ServerLiveRequest message. Also converts values to other types if specified.
         * @param message ServerLiveRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ServerLiveRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ServerLiveRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ServerLiveRequest {

        /** Properties of a ServerLiveRequest. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ServerLiveRequest. */
        type $Shape = inference.ServerLiveRequest.$Properties;
    }

    /**
     * Properties of a ServerLiveResponse.
     * @deprecated Use inference.ServerLiveResponse.$Properties instead.
     */
    interface IServerLiveResponse extends inference.ServerLiveResponse.$Properties {
    }

    /** Represents a ServerLiveResponse. */
    class ServerLiveResponse {

        /**
         * Constructs a new ServerLiveResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ServerLiveResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ServerLiveResponse live. */
        live: boolean;

        /**
         * Creates a new ServerLiveResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ServerLiveResponse instance
         */
        static create(properties: inference.ServerLiveResponse.$Shape): inference.ServerLiveResponse & inference.ServerLiveResponse.$Shape;
        static create(properties?: inference.ServerLiveResponse.$Properties): inference.ServerLiveResponse;

        /**
         * Encodes the specified ServerLiveResponse message. Does not implicitly {@link inference.ServerLiveResponse.verify|verify} messages.
         * @param message ServerLiveResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ServerLiveResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ServerLiveResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ServerLiveResponse & inference.ServerLiveResponse.$Shape} ServerLiveResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ServerLiveResponse & inference.ServerLiveResponse.$Shape;

        /**
         * Creates a ServerLiveResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ServerLiveResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ServerLiveResponse;

        /**
         * Creates a plain object from a ServerLiveResponse message. Also converts values to other types if specified.
         * @param message ServerLiveResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ServerLiveResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ServerLiveResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ServerLiveResponse {

        /** Properties of a ServerLiveResponse. */
        interface $Properties {

            /** ServerLiveResponse live */
            live?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ServerLiveResponse. */
        type $Shape = inference.ServerLiveResponse.$Properties;
    }

    /**
     * Properties of a ServerReadyRequest.
     * @deprecated Use inference.ServerReadyRequest.$Properties instead.
     */
    interface IServerReadyRequest extends inference.ServerReadyRequest.$Properties {
    }

    /** Represents a ServerReadyRequest. */
    class ServerReadyRequest {

        /**
         * Constructs a new ServerReadyRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ServerReadyRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new ServerReadyRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ServerReadyRequest instance
         */
        static create(properties: inference.ServerReadyRequest.$Shape): inference.ServerReadyRequest & inference.ServerReadyRequest.$Shape;
        static create(properties?: inference.ServerReadyRequest.$Properties): inference.ServerReadyRequest;

        /**
         * Encodes the specified ServerReadyRequest message. Does not implicitly {@link inference.ServerReadyRequest.verify|verify} messages.
         * @param message ServerReadyRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ServerReadyRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ServerReadyRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ServerReadyRequest & inference.ServerReadyRequest.$Shape} ServerReadyRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ServerReadyRequest & inference.ServerReadyRequest.$Shape;

        /**
         * Creates a ServerReadyRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ServerReadyRequest
         */
        static fromObject(object: { [k: string]: any }): inference.ServerReadyRequest;

        /**
         * Creates a plain object from a ServerReadyRequest message. Also converts values to other types if specified.
         * @param message ServerReadyRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ServerReadyRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ServerReadyRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ServerReadyRequest {

        /** Properties of a ServerReadyRequest. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ServerReadyRequest. */
        type $Shape = inference.ServerReadyRequest.$Properties;
    }

    /**
     * Properties of a ServerReadyResponse.
     * @deprecated Use inference.ServerReadyResponse.$Properties instead.
     */
    interface IServerReadyResponse extends inference.ServerReadyResponse.$Properties {
    }

    /** Represents a ServerReadyResponse. */
    class ServerReadyResponse {

        /**
         * Constructs a new ServerReadyResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ServerReadyResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ServerReadyResponse ready. */
        ready: boolean;

        /**
         * Creates a new ServerReadyResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ServerReadyResponse instance
         */
        static create(properties: inference.ServerReadyResponse.$Shape): inference.ServerReadyResponse & inference.ServerReadyResponse.$Shape;
        static create(properties?: inference.ServerReadyResponse.$Properties): inference.ServerReadyResponse;

        /**
         * Encodes the specified ServerReadyResponse message. Does not implicitly {@link inference.ServerReadyResponse.verify|verify} messages.
         * @param message ServerReadyResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ServerReadyResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ServerReadyResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ServerReadyResponse & inference.ServerReadyResponse.$Shape} ServerReadyResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ServerReadyResponse & inference.ServerReadyResponse.$Shape;

        /**
         * Creates a ServerReadyResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ServerReadyResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ServerReadyResponse;

        /**
         * Creates a plain object from a ServerReadyResponse message. Also converts values to other types if specified.
         * @param message ServerReadyResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ServerReadyResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ServerReadyResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ServerReadyResponse {

        /** Properties of a ServerReadyResponse. */
        interface $Properties {

            /** ServerReadyResponse ready */
            ready?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ServerReadyResponse. */
        type $Shape = inference.ServerReadyResponse.$Properties;
    }

    /**
     * Properties of a ModelReadyRequest.
     * @deprecated Use inference.ModelReadyRequest.$Properties instead.
     */
    interface IModelReadyRequest extends inference.ModelReadyRequest.$Properties {
    }

    /** Represents a ModelReadyRequest. */
    class ModelReadyRequest {

        /**
         * Constructs a new ModelReadyRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelReadyRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelReadyRequest name. */
        name: string;

        /** ModelReadyRequest version. */
        version: string;

        /**
         * Creates a new ModelReadyRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelReadyRequest instance
         */
        static create(properties: inference.ModelReadyRequest.$Shape): inference.ModelReadyRequest & inference.ModelReadyRequest.$Shape;
        static create(properties?: inference.ModelReadyRequest.$Properties): inference.ModelReadyRequest;

        /**
         * Encodes the specified ModelReadyRequest message. Does not implicitly {@link inference.ModelReadyRequest.verify|verify} messages.
         * @param message ModelReadyRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelReadyRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelReadyRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelReadyRequest & inference.ModelReadyRequest.$Shape} ModelReadyRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelReadyRequest & inference.ModelReadyRequest.$Shape;

        /**
         * Creates a ModelReadyRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelReadyRequest
         */
        static fromObject(object: { [k: string]: any }): inference.ModelReadyRequest;

        /**
         * Creates a plain object from a ModelReadyRequest message. Also converts values to other types if specified.
         * @param message ModelReadyRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelReadyRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelReadyRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelReadyRequest {

        /** Properties of a ModelReadyRequest. */
        interface $Properties {

            /** ModelReadyRequest name */
            name?: (string|null);

            /** ModelReadyRequest version */
            version?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelReadyRequest. */
        type $Shape = inference.ModelReadyRequest.$Properties;
    }

    /**
     * Properties of a ModelReadyResponse.
     * @deprecated Use inference.ModelReadyResponse.$Properties instead.
     */
    interface IModelReadyResponse extends inference.ModelReadyResponse.$Properties {
    }

    /** Represents a ModelReadyResponse. */
    class ModelReadyResponse {

        /**
         * Constructs a new ModelReadyResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelReadyResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelReadyResponse ready. */
        ready: boolean;

        /**
         * Creates a new ModelReadyResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelReadyResponse instance
         */
        static create(properties: inference.ModelReadyResponse.$Shape): inference.ModelReadyResponse & inference.ModelReadyResponse.$Shape;
        static create(properties?: inference.ModelReadyResponse.$Properties): inference.ModelReadyResponse;

        /**
         * Encodes the specified ModelReadyResponse message. Does not implicitly {@link inference.ModelReadyResponse.verify|verify} messages.
         * @param message ModelReadyResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelReadyResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelReadyResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelReadyResponse & inference.ModelReadyResponse.$Shape} ModelReadyResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelReadyResponse & inference.ModelReadyResponse.$Shape;

        /**
         * Creates a ModelReadyResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelReadyResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ModelReadyResponse;

        /**
         * Creates a plain object from a ModelReadyResponse message. Also converts values to other types if specified.
         * @param message ModelReadyResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelReadyResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelReadyResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelReadyResponse {

        /** Properties of a ModelReadyResponse. */
        interface $Properties {

            /** ModelReadyResponse ready */
            ready?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelReadyResponse. */
        type $Shape = inference.ModelReadyResponse.$Properties;
    }

    /**
     * Properties of a ServerMetadataRequest.
     * @deprecated Use inference.ServerMetadataRequest.$Properties instead.
     */
    interface IServerMetadataRequest extends inference.ServerMetadataRequest.$Properties {
    }

    /** Represents a ServerMetadataRequest. */
    class ServerMetadataRequest {

        /**
         * Constructs a new ServerMetadataRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ServerMetadataRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new ServerMetadataRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ServerMetadataRequest instance
         */
        static create(properties: inference.ServerMetadataRequest.$Shape): inference.ServerMetadataRequest & inference.ServerMetadataRequest.$Shape;
        static create(properties?: inference.ServerMetadataRequest.$Properties): inference.ServerMetadataRequest;

        /**
         * Encodes the specified ServerMetadataRequest message. Does not implicitly {@link inference.ServerMetadataRequest.verify|verify} messages.
         * @param message ServerMetadataRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ServerMetadataRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ServerMetadataRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ServerMetadataRequest & inference.ServerMetadataRequest.$Shape} ServerMetadataRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ServerMetadataRequest & inference.ServerMetadataRequest.$Shape;

        /**
         * Creates a ServerMetadataRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ServerMetadataRequest
         */
        static fromObject(object: { [k: string]: any }): inference.ServerMetadataRequest;

        /**
         * Creates a plain object from a ServerMetadataRequest message. Also converts values to other types if specified.
         * @param message ServerMetadataRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ServerMetadataRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ServerMetadataRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ServerMetadataRequest {

        /** Properties of a ServerMetadataRequest. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ServerMetadataRequest. */
        type $Shape = inference.ServerMetadataRequest.$Properties;
    }

    /**
     * Properties of a ServerMetadataResponse.
     * @deprecated Use inference.ServerMetadataResponse.$Properties instead.
     */
    interface IServerMetadataResponse extends inference.ServerMetadataResponse.$Properties {
    }

    /** Represents a ServerMetadataResponse. */
    class ServerMetadataResponse {

        /**
         * Constructs a new ServerMetadataResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ServerMetadataResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ServerMetadataResponse name. */
        name: string;

        /** ServerMetadataResponse version. */
        version: string;

        /** ServerMetadataResponse extensions. */
        extensions: string[];

        /**
         * Creates a new ServerMetadataResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ServerMetadataResponse instance
         */
        static create(properties: inference.ServerMetadataResponse.$Shape): inference.ServerMetadataResponse & inference.ServerMetadataResponse.$Shape;
        static create(properties?: inference.ServerMetadataResponse.$Properties): inference.ServerMetadataResponse;

        /**
         * Encodes the specified ServerMetadataResponse message. Does not implicitly {@link inference.ServerMetadataResponse.verify|verify} messages.
         * @param message ServerMetadataResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ServerMetadataResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ServerMetadataResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ServerMetadataResponse & inference.ServerMetadataResponse.$Shape} ServerMetadataResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ServerMetadataResponse & inference.ServerMetadataResponse.$Shape;

        /**
         * Creates a ServerMetadataResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ServerMetadataResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ServerMetadataResponse;

        /**
         * Creates a plain object from a ServerMetadataResponse message. Also converts values to other types if specified.
         * @param message ServerMetadataResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ServerMetadataResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ServerMetadataResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ServerMetadataResponse {

        /** Properties of a ServerMetadataResponse. */
        interface $Properties {

            /** ServerMetadataResponse name */
            name?: (string|null);

            /** ServerMetadataResponse version */
            version?: (string|null);

            /** ServerMetadataResponse extensions */
            extensions?: (string[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ServerMetadataResponse. */
        type $Shape = inference.ServerMetadataResponse.$Properties;
    }

    /**
     * Properties of a ModelMetadataRequest.
     * @deprecated Use inference.ModelMetadataRequest.$Properties instead.
     */
    interface IModelMetadataRequest extends inference.ModelMetadataRequest.$Properties {
    }

    /** Represents a ModelMetadataRequest. */
    class ModelMetadataRequest {

        /**
         * Constructs a new ModelMetadataRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelMetadataRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelMetadataRequest name. */
        name: string;

        /** ModelMetadataRequest version. */
        version: string;

        /**
         * Creates a new ModelMetadataRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelMetadataRequest instance
         */
        static create(properties: inference.ModelMetadataRequest.$Shape): inference.ModelMetadataRequest & inference.ModelMetadataRequest.$Shape;
        static create(properties?: inference.ModelMetadataRequest.$Properties): inference.ModelMetadataRequest;

        /**
         * Encodes the specified ModelMetadataRequest message. Does not implicitly {@link inference.ModelMetadataRequest.verify|verify} messages.
         * @param message ModelMetadataRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelMetadataRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelMetadataRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelMetadataRequest & inference.ModelMetadataRequest.$Shape} ModelMetadataRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelMetadataRequest & inference.ModelMetadataRequest.$Shape;

        /**
         * Creates a ModelMetadataRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelMetadataRequest
         */
        static fromObject(object: { [k: string]: any }): inference.ModelMetadataRequest;

        /**
         * Creates a plain object from a ModelMetadataRequest message. Also converts values to other types if specified.
         * @param message ModelMetadataRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelMetadataRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelMetadataRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelMetadataRequest {

        /** Properties of a ModelMetadataRequest. */
        interface $Properties {

            /** ModelMetadataRequest name */
            name?: (string|null);

            /** ModelMetadataRequest version */
            version?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelMetadataRequest. */
        type $Shape = inference.ModelMetadataRequest.$Properties;
    }

    /**
     * Properties of a ModelMetadataResponse.
     * @deprecated Use inference.ModelMetadataResponse.$Properties instead.
     */
    interface IModelMetadataResponse extends inference.ModelMetadataResponse.$Properties {
    }

    /** Represents a ModelMetadataResponse. */
    class ModelMetadataResponse {

        /**
         * Constructs a new ModelMetadataResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelMetadataResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelMetadataResponse name. */
        name: string;

        /** ModelMetadataResponse versions. */
        versions: string[];

        /** ModelMetadataResponse platform. */
        platform: string;

        /** ModelMetadataResponse inputs. */
        inputs: inference.ModelMetadataResponse.TensorMetadata.$Properties[];

        /** ModelMetadataResponse outputs. */
        outputs: inference.ModelMetadataResponse.TensorMetadata.$Properties[];

        /**
         * Creates a new ModelMetadataResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelMetadataResponse instance
         */
        static create(properties: inference.ModelMetadataResponse.$Shape): inference.ModelMetadataResponse & inference.ModelMetadataResponse.$Shape;
        static create(properties?: inference.ModelMetadataResponse.$Properties): inference.ModelMetadataResponse;

        /**
         * Encodes the specified ModelMetadataResponse message. Does not implicitly {@link inference.ModelMetadataResponse.verify|verify} messages.
         * @param message ModelMetadataResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelMetadataResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelMetadataResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelMetadataResponse & inference.ModelMetadataResponse.$Shape} ModelMetadataResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelMetadataResponse & inference.ModelMetadataResponse.$Shape;

        /**
         * Creates a ModelMetadataResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelMetadataResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ModelMetadataResponse;

        /**
         * Creates a plain object from a ModelMetadataResponse message. Also converts values to other types if specified.
         * @param message ModelMetadataResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelMetadataResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelMetadataResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelMetadataResponse {

        /** Properties of a ModelMetadataResponse. */
        interface $Properties {

            /** ModelMetadataResponse name */
            name?: (string|null);

            /** ModelMetadataResponse versions */
            versions?: (string[]|null);

            /** ModelMetadataResponse platform */
            platform?: (string|null);

            /** ModelMetadataResponse inputs */
            inputs?: (inference.ModelMetadataResponse.TensorMetadata.$Properties[]|null);

            /** ModelMetadataResponse outputs */
            outputs?: (inference.ModelMetadataResponse.TensorMetadata.$Properties[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelMetadataResponse. */
        type $Shape = inference.ModelMetadataResponse.$Properties;

        /**
         * Properties of a TensorMetadata.
         * @deprecated Use inference.ModelMetadataResponse.TensorMetadata.$Properties instead.
         */
        interface ITensorMetadata extends inference.ModelMetadataResponse.TensorMetadata.$Properties {
        }

        /** Represents a TensorMetadata. */
        class TensorMetadata {

            /**
             * Constructs a new TensorMetadata.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelMetadataResponse.TensorMetadata.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** TensorMetadata name. */
            name: string;

            /** TensorMetadata datatype. */
            datatype: string;

            /** TensorMetadata shape. */
            shape: (number|Long)[];

            /**
             * Creates a new TensorMetadata instance using the specified properties.
             * @param [properties] Properties to set
             * @returns TensorMetadata instance
             */
            static create(properties: inference.ModelMetadataResponse.TensorMetadata.$Shape): inference.ModelMetadataResponse.TensorMetadata & inference.ModelMetadataResponse.TensorMetadata.$Shape;
            static create(properties?: inference.ModelMetadataResponse.TensorMetadata.$Properties): inference.ModelMetadataResponse.TensorMetadata;

            /**
             * Encodes the specified TensorMetadata message. Does not implicitly {@link inference.ModelMetadataResponse.TensorMetadata.verify|verify} messages.
             * @param message TensorMetadata message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelMetadataResponse.TensorMetadata.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a TensorMetadata message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelMetadataResponse.TensorMetadata & inference.ModelMetadataResponse.TensorMetadata.$Shape} TensorMetadata
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelMetadataResponse.TensorMetadata & inference.ModelMetadataResponse.TensorMetadata.$Shape;

            /**
             * Creates a TensorMetadata message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns TensorMetadata
             */
            static fromObject(object: { [k: string]: any }): inference.ModelMetadataResponse.TensorMetadata;

            /**
             * Creates a plain object from a TensorMetadata message. Also converts values to other types if specified.
             * @param message TensorMetadata
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelMetadataResponse.TensorMetadata, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this TensorMetadata to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace TensorMetadata {

            /** Properties of a TensorMetadata. */
            interface $Properties {

                /** TensorMetadata name */
                name?: (string|null);

                /** TensorMetadata datatype */
                datatype?: (string|null);

                /** TensorMetadata shape */
                shape?: ((number|Long)[]|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a TensorMetadata. */
            type $Shape = inference.ModelMetadataResponse.TensorMetadata.$Properties;
        }
    }

    /**
     * Properties of an InferParameter.
     * @deprecated Use inference.InferParameter.$Properties instead.
     */
    interface IInferParameter extends inference.InferParameter.$Properties {
    }

    /** Represents an InferParameter. */
    class InferParameter {

        /**
         * Constructs a new InferParameter.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.InferParameter.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** InferParameter bool_param. */
        bool_param?: (boolean|null);

        /** InferParameter int64_param. */
        int64_param?: (number|Long|null);

        /** InferParameter string_param. */
        string_param?: (string|null);

        /** InferParameter double_param. */
        double_param?: (number|null);

        /** InferParameter uint64_param. */
        uint64_param?: (number|Long|null);

        /** InferParameter parameter_choice. */
        parameter_choice?: ("bool_param"|"int64_param"|"string_param"|"double_param"|"uint64_param");

        /**
         * Creates a new InferParameter instance using the specified properties.
         * @param [properties] Properties to set
         * @returns InferParameter instance
         */
        static create(properties: inference.InferParameter.$Shape): inference.InferParameter & inference.InferParameter.$Shape;
        static create(properties?: inference.InferParameter.$Properties): inference.InferParameter;

        /**
         * Encodes the specified InferParameter message. Does not implicitly {@link inference.InferParameter.verify|verify} messages.
         * @param message InferParameter message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.InferParameter.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes an InferParameter message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.InferParameter & inference.InferParameter.$Shape} InferParameter
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.InferParameter & inference.InferParameter.$Shape;

        /**
         * Creates an InferParameter message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns InferParameter
         */
        static fromObject(object: { [k: string]: any }): inference.InferParameter;

        /**
         * Creates a plain object from an InferParameter message. Also converts values to other types if specified.
         * @param message InferParameter
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.InferParameter, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this InferParameter to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace InferParameter {

        /** Properties of an InferParameter. */
        interface $Properties {

            /** InferParameter bool_param */
            bool_param?: (boolean|null);

            /** InferParameter int64_param */
            int64_param?: (number|Long|null);

            /** InferParameter string_param */
            string_param?: (string|null);

            /** InferParameter double_param */
            double_param?: (number|null);

            /** InferParameter uint64_param */
            uint64_param?: (number|Long|null);

            /** InferParameter parameter_choice */
            parameter_choice?: ("bool_param"|"int64_param"|"string_param"|"double_param"|"uint64_param");

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Narrowed shape of an InferParameter. */
        type $Shape = {
          bool_param?: boolean|null;
          int64_param?: number|Long|null;
          string_param?: string|null;
          double_param?: number|null;
          uint64_param?: number|Long|null;
          $unknowns?: Uint8Array[];
        } & (
          ({ parameter_choice?: undefined; bool_param?: null; int64_param?: null; string_param?: null; double_param?: null; uint64_param?: null }|{ parameter_choice?: "bool_param"; bool_param: boolean; int64_param?: null; string_param?: null; double_param?: null; uint64_param?: null }|{ parameter_choice?: "int64_param"; bool_param?: null; int64_param: number|Long; string_param?: null; double_param?: null; uint64_param?: null }|{ parameter_choice?: "string_param"; bool_param?: null; int64_param?: null; string_param: string; double_param?: null; uint64_param?: null }|{ parameter_choice?: "double_param"; bool_param?: null; int64_param?: null; string_param?: null; double_param: number; uint64_param?: null }|{ parameter_choice?: "uint64_param"; bool_param?: null; int64_param?: null; string_param?: null; double_param?: null; uint64_param: number|Long })
        );
    }

    /**
     * Properties of an InferTensorContents.
     * @deprecated Use inference.InferTensorContents.$Properties instead.
     */
    interface IInferTensorContents extends inference.InferTensorContents.$Properties {
    }

    /** Represents an InferTensorContents. */
    class InferTensorContents {

        /**
         * Constructs a new InferTensorContents.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.InferTensorContents.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** InferTensorContents bool_contents. */
        bool_contents: boolean[];

        /** InferTensorContents int_contents. */
        int_contents: number[];

        /** InferTensorContents int64_contents. */
        int64_contents: (number|Long)[];

        /** InferTensorContents uint_contents. */
        uint_contents: number[];

        /** InferTensorContents uint64_contents. */
        uint64_contents: (number|Long)[];

        /** InferTensorContents fp32_contents. */
        fp32_contents: number[];

        /** InferTensorContents fp64_contents. */
        fp64_contents: number[];

        /** InferTensorContents bytes_contents. */
        bytes_contents: Uint8Array[];

        /**
         * Creates a new InferTensorContents instance using the specified properties.
         * @param [properties] Properties to set
         * @returns InferTensorContents instance
         */
        static create(properties: inference.InferTensorContents.$Shape): inference.InferTensorContents & inference.InferTensorContents.$Shape;
        static create(properties?: inference.InferTensorContents.$Properties): inference.InferTensorContents;

        /**
         * Encodes the specified InferTensorContents message. Does not implicitly {@link inference.InferTensorContents.verify|verify} messages.
         * @param message InferTensorContents message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.InferTensorContents.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes an InferTensorContents message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.InferTensorContents & inference.InferTensorContents.$Shape} InferTensorContents
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.InferTensorContents & inference.InferTensorContents.$Shape;

        /**
         * Creates an InferTensorContents message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns InferTensorContents
         */
        static fromObject(object: { [k: string]: any }): inference.InferTensorContents;

        /**
         * Creates a plain object from an InferTensorContents message. Also converts values to other types if specified.
         * @param message InferTensorContents
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.InferTensorContents, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this InferTensorContents to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace InferTensorContents {

        /** Properties of an InferTensorContents. */
        interface $Properties {

            /** InferTensorContents bool_contents */
            bool_contents?: (boolean[]|null);

            /** InferTensorContents int_contents */
            int_contents?: (number[]|null);

            /** InferTensorContents int64_contents */
            int64_contents?: ((number|Long)[]|null);

            /** InferTensorContents uint_contents */
            uint_contents?: (number[]|null);

            /** InferTensorContents uint64_contents */
            uint64_contents?: ((number|Long)[]|null);

            /** InferTensorContents fp32_contents */
            fp32_contents?: (number[]|null);

            /** InferTensorContents fp64_contents */
            fp64_contents?: (number[]|null);

            /** InferTensorContents bytes_contents */
            bytes_contents?: (Uint8Array[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of an InferTensorContents. */
        type $Shape = inference.InferTensorContents.$Properties;
    }

    /**
     * Properties of a ModelInferRequest.
     * @deprecated Use inference.ModelInferRequest.$Properties instead.
     */
    interface IModelInferRequest extends inference.ModelInferRequest.$Properties {
    }

    /** Represents a ModelInferRequest. */
    class ModelInferRequest {

        /**
         * Constructs a new ModelInferRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelInferRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelInferRequest model_name. */
        model_name: string;

        /** ModelInferRequest model_version. */
        model_version: string;

        /** ModelInferRequest id. */
        id: string;

        /** ModelInferRequest parameters. */
        parameters: { [k: string]: inference.InferParameter.$Properties };

        /** ModelInferRequest inputs. */
        inputs: inference.ModelInferRequest.InferInputTensor.$Properties[];

        /** ModelInferRequest outputs. */
        outputs: inference.ModelInferRequest.InferRequestedOutputTensor.$Properties[];

        /** ModelInferRequest raw_input_contents. */
        raw_input_contents: Uint8Array[];

        /**
         * Creates a new ModelInferRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelInferRequest instance
         */
        static create(properties: inference.ModelInferRequest.$Shape): inference.ModelInferRequest & inference.ModelInferRequest.$Shape;
        static create(properties?: inference.ModelInferRequest.$Properties): inference.ModelInferRequest;

        /**
         * Encodes the specified ModelInferRequest message. Does not implicitly {@link inference.ModelInferRequest.verify|verify} messages.
         * @param message ModelInferRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelInferRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelInferRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelInferRequest & inference.ModelInferRequest.$Shape} ModelInferRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelInferRequest & inference.ModelInferRequest.$Shape;

        /**
         * Creates a ModelInferRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelInferRequest
         */
        static fromObject(object: { [k: string]: any }): inference.ModelInferRequest;

        /**
         * Creates a plain object from a ModelInferRequest message. Also converts values to other types if specified.
         * @param message ModelInferRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelInferRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelInferRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelInferRequest {

        /** Properties of a ModelInferRequest. */
        interface $Properties {

            /** ModelInferRequest model_name */
            model_name?: (string|null);

            /** ModelInferRequest model_version */
            model_version?: (string|null);

            /** ModelInferRequest id */
            id?: (string|null);

            /** ModelInferRequest parameters */
            parameters?: ({ [k: string]: inference.InferParameter.$Properties }|null);

            /** ModelInferRequest inputs */
            inputs?: (inference.ModelInferRequest.InferInputTensor.$Properties[]|null);

            /** ModelInferRequest outputs */
            outputs?: (inference.ModelInferRequest.InferRequestedOutputTensor.$Properties[]|null);

            /** ModelInferRequest raw_input_contents */
            raw_input_contents?: (Uint8Array[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelInferRequest. */
        type $Shape = {
          model_name?: string|null;
          model_version?: string|null;
          id?: string|null;
          parameters?: { [k: string]: inference.InferParameter.$Shape }|null;
          inputs?: inference.ModelInferRequest.InferInputTensor.$Shape[]|null;
          outputs?: inference.ModelInferRequest.InferRequestedOutputTensor.$Shape[]|null;
          raw_input_contents?: Uint8Array[]|null;
          $unknowns?: Uint8Array[];
        };

        /**
         * Properties of an InferInputTensor.
         * @deprecated Use inference.ModelInferRequest.InferInputTensor.$Properties instead.
         */
        interface IInferInputTensor extends inference.ModelInferRequest.InferInputTensor.$Properties {
        }

        /** Represents an InferInputTensor. */
        class InferInputTensor {

            /**
             * Constructs a new InferInputTensor.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelInferRequest.InferInputTensor.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** InferInputTensor name. */
            name: string;

            /** InferInputTensor datatype. */
            datatype: string;

            /** InferInputTensor shape. */
            shape: (number|Long)[];

            /** InferInputTensor parameters. */
            parameters: { [k: string]: inference.InferParameter.$Properties };

            /** InferInputTensor contents. */
            contents?: (inference.InferTensorContents.$Properties|null);

            /**
             * Creates a new InferInputTensor instance using the specified properties.
             * @param [properties] Properties to set
             * @returns InferInputTensor instance
             */
            static create(properties: inference.ModelInferRequest.InferInputTensor.$Shape): inference.ModelInferRequest.InferInputTensor & inference.ModelInferRequest.InferInputTensor.$Shape;
            static create(properties?: inference.ModelInferRequest.InferInputTensor.$Properties): inference.ModelInferRequest.InferInputTensor;

            /**
             * Encodes the specified InferInputTensor message. Does not implicitly {@link inference.ModelInferRequest.InferInputTensor.verify|verify} messages.
             * @param message InferInputTensor message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelInferRequest.InferInputTensor.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes an InferInputTensor message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelInferRequest.InferInputTensor & inference.ModelInferRequest.InferInputTensor.$Shape} InferInputTensor
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelInferRequest.InferInputTensor & inference.ModelInferRequest.InferInputTensor.$Shape;

            /**
             * Creates an InferInputTensor message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns InferInputTensor
             */
            static fromObject(object: { [k: string]: any }): inference.ModelInferRequest.InferInputTensor;

            /**
             * Creates a plain object from an InferInputTensor message. Also converts values to other types if specified.
             * @param message InferInputTensor
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelInferRequest.InferInputTensor, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this InferInputTensor to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace InferInputTensor {

            /** Properties of an InferInputTensor. */
            interface $Properties {

                /** InferInputTensor name */
                name?: (string|null);

                /** InferInputTensor datatype */
                datatype?: (string|null);

                /** InferInputTensor shape */
                shape?: ((number|Long)[]|null);

                /** InferInputTensor parameters */
                parameters?: ({ [k: string]: inference.InferParameter.$Properties }|null);

                /** InferInputTensor contents */
                contents?: (inference.InferTensorContents.$Properties|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of an InferInputTensor. */
            type $Shape = {
              name?: string|null;
              datatype?: string|null;
              shape?: (number|Long)[]|null;
              parameters?: { [k: string]: inference.InferParameter.$Shape }|null;
              contents?: inference.InferTensorContents.$Shape|null;
              $unknowns?: Uint8Array[];
            };
        }

        /**
         * Properties of an InferRequestedOutputTensor.
         * @deprecated Use inference.ModelInferRequest.InferRequestedOutputTensor.$Properties instead.
         */
        interface IInferRequestedOutputTensor extends inference.ModelInferRequest.InferRequestedOutputTensor.$Properties {
        }

        /** Represents an InferRequestedOutputTensor. */
        class InferRequestedOutputTensor {

            /**
             * Constructs a new InferRequestedOutputTensor.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelInferRequest.InferRequestedOutputTensor.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** InferRequestedOutputTensor name. */
            name: string;

            /** InferRequestedOutputTensor parameters. */
            parameters: { [k: string]: inference.InferParameter.$Properties };

            /**
             * Creates a new InferRequestedOutputTensor instance using the specified properties.
             * @param [properties] Properties to set
             * @returns InferRequestedOutputTensor instance
             */
            static create(properties: inference.ModelInferRequest.InferRequestedOutputTensor.$Shape): inference.ModelInferRequest.InferRequestedOutputTensor & inference.ModelInferRequest.InferRequestedOutputTensor.$Shape;
            static create(properties?: inference.ModelInferRequest.InferRequestedOutputTensor.$Properties): inference.ModelInferRequest.InferRequestedOutputTensor;

            /**
             * Encodes the specified InferRequestedOutputTensor message. Does not implicitly {@link inference.ModelInferRequest.InferRequestedOutputTensor.verify|verify} messages.
             * @param message InferRequestedOutputTensor message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelInferRequest.InferRequestedOutputTensor.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes an InferRequestedOutputTensor message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelInferRequest.InferRequestedOutputTensor & inference.ModelInferRequest.InferRequestedOutputTensor.$Shape} InferRequestedOutputTensor
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelInferRequest.InferRequestedOutputTensor & inference.ModelInferRequest.InferRequestedOutputTensor.$Shape;

            /**
             * Creates an InferRequestedOutputTensor message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns InferRequestedOutputTensor
             */
            static fromObject(object: { [k: string]: any }): inference.ModelInferRequest.InferRequestedOutputTensor;

            /**
             * Creates a plain object from an InferRequestedOutputTensor message. Also converts values to other types if specified.
             * @param message InferRequestedOutputTensor
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelInferRequest.InferRequestedOutputTensor, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this InferRequestedOutputTensor to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace InferRequestedOutputTensor {

            /** Properties of an InferRequestedOutputTensor. */
            interface $Properties {

                /** InferRequestedOutputTensor name */
                name?: (string|null);

                /** InferRequestedOutputTensor parameters */
                parameters?: ({ [k: string]: inference.InferParameter.$Properties }|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of an InferRequestedOutputTensor. */
            type $Shape = {
              name?: string|null;
              parameters?: { [k: string]: inference.InferParameter.$Shape }|null;
              $unknowns?: Uint8Array[];
            };
        }
    }

    /**
     * Properties of a ModelInferResponse.
     * @deprecated Use inference.ModelInferResponse.$Properties instead.
     */
    interface IModelInferResponse extends inference.ModelInferResponse.$Properties {
    }

    /** Represents a ModelInferResponse. */
    class ModelInferResponse {

        /**
         * Constructs a new ModelInferResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelInferResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelInferResponse model_name. */
        model_name: string;

        /** ModelInferResponse model_version. */
        model_version: string;

        /** ModelInferResponse id. */
        id: string;

        /** ModelInferResponse parameters. */
        parameters: { [k: string]: inference.InferParameter.$Properties };

        /** ModelInferResponse outputs. */
        outputs: inference.ModelInferResponse.InferOutputTensor.$Properties[];

        /** ModelInferResponse raw_output_contents. */
        raw_output_contents: Uint8Array[];

        /**
         * Creates a new ModelInferResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelInferResponse instance
         */
        static create(properties: inference.ModelInferResponse.$Shape): inference.ModelInferResponse & inference.ModelInferResponse.$Shape;
        static create(properties?: inference.ModelInferResponse.$Properties): inference.ModelInferResponse;

        /**
         * Encodes the specified ModelInferResponse message. Does not implicitly {@link inference.ModelInferResponse.verify|verify} messages.
         * @param message ModelInferResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelInferResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelInferResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelInferResponse & inference.ModelInferResponse.$Shape} ModelInferResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelInferResponse & inference.ModelInferResponse.$Shape;

        /**
         * Creates a ModelInferResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelInferResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ModelInferResponse;

        /**
         * Creates a plain object from a ModelInferResponse message. Also converts values to other types if specified.
         * @param message ModelInferResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelInferResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelInferResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelInferResponse {

        /** Properties of a ModelInferResponse. */
        interface $Properties {

            /** ModelInferResponse model_name */
            model_name?: (string|null);

            /** ModelInferResponse model_version */
            model_version?: (string|null);

            /** ModelInferResponse id */
            id?: (string|null);

            /** ModelInferResponse parameters */
            parameters?: ({ [k: string]: inference.InferParameter.$Properties }|null);

            /** ModelInferResponse outputs */
            outputs?: (inference.ModelInferResponse.InferOutputTensor.$Properties[]|null);

            /** ModelInferResponse raw_output_contents */
            raw_output_contents?: (Uint8Array[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelInferResponse. */
        type $Shape = {
          model_name?: string|null;
          model_version?: string|null;
          id?: string|null;
          parameters?: { [k: string]: inference.InferParameter.$Shape }|null;
          outputs?: inference.ModelInferResponse.InferOutputTensor.$Shape[]|null;
          raw_output_contents?: Uint8Array[]|null;
          $unknowns?: Uint8Array[];
        };

        /**
         * Properties of an InferOutputTensor.
         * @deprecated Use inference.ModelInferResponse.InferOutputTensor.$Properties instead.
         */
        interface IInferOutputTensor extends inference.ModelInferResponse.InferOutputTensor.$Properties {
        }

        /** Represents an InferOutputTensor. */
        class InferOutputTensor {

            /**
             * Constructs a new InferOutputTensor.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelInferResponse.InferOutputTensor.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** InferOutputTensor name. */
            name: string;

            /** InferOutputTensor datatype. */
            datatype: string;

            /** InferOutputTensor shape. */
            shape: (number|Long)[];

            /** InferOutputTensor parameters. */
            parameters: { [k: string]: inference.InferParameter.$Properties };

            /** InferOutputTensor contents. */
            contents?: (inference.InferTensorContents.$Properties|null);

            /**
             * Creates a new InferOutputTensor instance using the specified properties.
             * @param [properties] Properties to set
             * @returns InferOutputTensor instance
             */
            static create(properties: inference.ModelInferResponse.InferOutputTensor.$Shape): inference.ModelInferResponse.InferOutputTensor & inference.ModelInferResponse.InferOutputTensor.$Shape;
            static create(properties?: inference.ModelInferResponse.InferOutputTensor.$Properties): inference.ModelInferResponse.InferOutputTensor;

            /**
             * Encodes the specified InferOutputTensor message. Does not implicitly {@link inference.ModelInferResponse.InferOutputTensor.verify|verify} messages.
             * @param message InferOutputTensor message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelInferResponse.InferOutputTensor.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes an InferOutputTensor message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelInferResponse.InferOutputTensor & inference.ModelInferResponse.InferOutputTensor.$Shape} InferOutputTensor
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelInferResponse.InferOutputTensor & inference.ModelInferResponse.InferOutputTensor.$Shape;

            /**
             * Creates an InferOutputTensor message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns InferOutputTensor
             */
            static fromObject(object: { [k: string]: any }): inference.ModelInferResponse.InferOutputTensor;

            /**
             * Creates a plain object from an InferOutputTensor message. Also converts values to other types if specified.
             * @param message InferOutputTensor
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelInferResponse.InferOutputTensor, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this InferOutputTensor to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace InferOutputTensor {

            /** Properties of an InferOutputTensor. */
            interface $Properties {

                /** InferOutputTensor name */
                name?: (string|null);

                /** InferOutputTensor datatype */
                datatype?: (string|null);

                /** InferOutputTensor shape */
                shape?: ((number|Long)[]|null);

                /** InferOutputTensor parameters */
                parameters?: ({ [k: string]: inference.InferParameter.$Properties }|null);

                /** InferOutputTensor contents */
                contents?: (inference.InferTensorContents.$Properties|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of an InferOutputTensor. */
            type $Shape = {
              name?: string|null;
              datatype?: string|null;
              shape?: (number|Long)[]|null;
              parameters?: { [k: string]: inference.InferParameter.$Shape }|null;
              contents?: inference.InferTensorContents.$Shape|null;
              $unknowns?: Uint8Array[];
            };
        }
    }

    /**
     * Properties of a ModelStreamInferResponse.
     * @deprecated Use inference.ModelStreamInferResponse.$Properties instead.
     */
    interface IModelStreamInferResponse extends inference.ModelStreamInferResponse.$Properties {
    }

    /** Represents a ModelStreamInferResponse. */
    class ModelStreamInferResponse {

        /**
         * Constructs a new ModelStreamInferResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelStreamInferResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelStreamInferResponse error_message. */
        error_message: string;

        /** ModelStreamInferResponse infer_response. */
        infer_response?: (inference.ModelInferResponse.$Properties|null);

        /**
         * Creates a new ModelStreamInferResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelStreamInferResponse instance
         */
        static create(properties: inference.ModelStreamInferResponse.$Shape): inference.ModelStreamInferResponse & inference.ModelStreamInferResponse.$Shape;
        static create(properties?: inference.ModelStreamInferResponse.$Properties): inference.ModelStreamInferResponse;

        /**
         * Encodes the specified ModelStreamInferResponse message. Does not implicitly {@link inference.ModelStreamInferResponse.verify|verify} messages.
         * @param message ModelStreamInferResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelStreamInferResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelStreamInferResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelStreamInferResponse & inference.ModelStreamInferResponse.$Shape} ModelStreamInferResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelStreamInferResponse & inference.ModelStreamInferResponse.$Shape;

        /**
         * Creates a ModelStreamInferResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelStreamInferResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ModelStreamInferResponse;

        /**
         * Creates a plain object from a ModelStreamInferResponse message. Also converts values to other types if specified.
         * @param message ModelStreamInferResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelStreamInferResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelStreamInferResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelStreamInferResponse {

        /** Properties of a ModelStreamInferResponse. */
        interface $Properties {

            /** ModelStreamInferResponse error_message */
            error_message?: (string|null);

            /** ModelStreamInferResponse infer_response */
            infer_response?: (inference.ModelInferResponse.$Properties|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelStreamInferResponse. */
        type $Shape = {
          error_message?: string|null;
          infer_response?: inference.ModelInferResponse.$Shape|null;
          $unknowns?: Uint8Array[];
        };
    }

    /**
     * Properties of a ModelConfigRequest.
     * @deprecated Use inference.ModelConfigRequest.$Properties instead.
     */
    interface IModelConfigRequest extends inference.ModelConfigRequest.$Properties {
    }

    /** Represents a ModelConfigRequest. */
    class ModelConfigRequest {

        /**
         * Constructs a new ModelConfigRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelConfigRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelConfigRequest name. */
        name: string;

        /** ModelConfigRequest version. */
        version: string;

        /**
         * Creates a new ModelConfigRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelConfigRequest instance
         */
        static create(properties: inference.ModelConfigRequest.$Shape): inference.ModelConfigRequest & inference.ModelConfigRequest.$Shape;
        static create(properties?: inference.ModelConfigRequest.$Properties): inference.ModelConfigRequest;

        /**
         * Encodes the specified ModelConfigRequest message. Does not implicitly {@link inference.ModelConfigRequest.verify|verify} messages.
         * @param message ModelConfigRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelConfigRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelConfigRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelConfigRequest & inference.ModelConfigRequest.$Shape} ModelConfigRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelConfigRequest & inference.ModelConfigRequest.$Shape;

        /**
         * Creates a ModelConfigRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelConfigRequest
         */
        static fromObject(object: { [k: string]: any }): inference.ModelConfigRequest;

        /**
         * Creates a plain object from a ModelConfigRequest message. Also converts values to other types if specified.
         * @param message ModelConfigRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelConfigRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelConfigRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelConfigRequest {

        /** Properties of a ModelConfigRequest. */
        interface $Properties {

            /** ModelConfigRequest name */
            name?: (string|null);

            /** ModelConfigRequest version */
            version?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelConfigRequest. */
        type $Shape = inference.ModelConfigRequest.$Properties;
    }

    /**
     * Properties of a ModelConfigResponse.
     * @deprecated Use inference.ModelConfigResponse.$Properties instead.
     */
    interface IModelConfigResponse extends inference.ModelConfigResponse.$Properties {
    }

    /** Represents a ModelConfigResponse. */
    class ModelConfigResponse {

        /**
         * Constructs a new ModelConfigResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelConfigResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelConfigResponse config. */
        config?: (inference.ModelConfig.$Properties|null);

        /**
         * Creates a new ModelConfigResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelConfigResponse instance
         */
        static create(properties: inference.ModelConfigResponse.$Shape): inference.ModelConfigResponse & inference.ModelConfigResponse.$Shape;
        static create(properties?: inference.ModelConfigResponse.$Properties): inference.ModelConfigResponse;

        /**
         * Encodes the specified ModelConfigResponse message. Does not implicitly {@link inference.ModelConfigResponse.verify|verify} messages.
         * @param message ModelConfigResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelConfigResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelConfigResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelConfigResponse & inference.ModelConfigResponse.$Shape} ModelConfigResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelConfigResponse & inference.ModelConfigResponse.$Shape;

        /**
         * Creates a ModelConfigResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelConfigResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ModelConfigResponse;

        /**
         * Creates a plain object from a ModelConfigResponse message. Also converts values to other types if specified.
         * @param message ModelConfigResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelConfigResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelConfigResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelConfigResponse {

        /** Properties of a ModelConfigResponse. */
        interface $Properties {

            /** ModelConfigResponse config */
            config?: (inference.ModelConfig.$Properties|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelConfigResponse. */
        type $Shape = {
          config?: inference.ModelConfig.$Shape|null;
          $unknowns?: Uint8Array[];
        };
    }

    /**
     * Properties of a ModelStatisticsRequest.
     * @deprecated Use inference.ModelStatisticsRequest.$Properties instead.
     */
    interface IModelStatisticsRequest extends inference.ModelStatisticsRequest.$Properties {
    }

    /** Represents a ModelStatisticsRequest. */
    class ModelStatisticsRequest {

        /**
         * Constructs a new ModelStatisticsRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelStatisticsRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelStatisticsRequest name. */
        name: string;

        /** ModelStatisticsRequest version. */
        version: string;

        /**
         * Creates a new ModelStatisticsRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelStatisticsRequest instance
         */
        static create(properties: inference.ModelStatisticsRequest.$Shape): inference.ModelStatisticsRequest & inference.ModelStatisticsRequest.$Shape;
        static create(properties?: inference.ModelStatisticsRequest.$Properties): inference.ModelStatisticsRequest;

        /**
         * Encodes the specified ModelStatisticsRequest message. Does not implicitly {@link inference.ModelStatisticsRequest.verify|verify} messages.
         * @param message ModelStatisticsRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelStatisticsRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelStatisticsRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelStatisticsRequest & inference.ModelStatisticsRequest.$Shape} ModelStatisticsRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelStatisticsRequest & inference.ModelStatisticsRequest.$Shape;

        /**
         * Creates a ModelStatisticsRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelStatisticsRequest
         */
        static fromObject(object: { [k: string]: any }): inference.ModelStatisticsRequest;

        /**
         * Creates a plain object from a ModelStatisticsRequest message. Also converts values to other types if specified.
         * @param message ModelStatisticsRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelStatisticsRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelStatisticsRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelStatisticsRequest {

        /** Properties of a ModelStatisticsRequest. */
        interface $Properties {

            /** ModelStatisticsRequest name */
            name?: (string|null);

            /** ModelStatisticsRequest version */
            version?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelStatisticsRequest. */
        type $Shape = inference.ModelStatisticsRequest.$Properties;
    }

    /**
     * Properties of a StatisticDuration.
     * @deprecated Use inference.StatisticDuration.$Properties instead.
     */
    interface IStatisticDuration extends inference.StatisticDuration.$Properties {
    }

    /** Represents a StatisticDuration. */
    class StatisticDuration {

        /**
         * Constructs a new StatisticDuration.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.StatisticDuration.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** StatisticDuration count. */
        count: (number|Long);

        /** StatisticDuration ns. */
        ns: (number|Long);

        /**
         * Creates a new StatisticDuration instance using the specified properties.
         * @param [properties] Properties to set
         * @returns StatisticDuration instance
         */
        static create(properties: inference.StatisticDuration.$Shape): inference.StatisticDuration & inference.StatisticDuration.$Shape;
        static create(properties?: inference.StatisticDuration.$Properties): inference.StatisticDuration;

        /**
         * Encodes the specified StatisticDuration message. Does not implicitly {@link inference.StatisticDuration.verify|verify} messages.
         * @param message StatisticDuration message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.StatisticDuration.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a StatisticDuration message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.StatisticDuration & inference.StatisticDuration.$Shape} StatisticDuration
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.StatisticDuration & inference.StatisticDuration.$Shape;

        /**
         * Creates a StatisticDuration message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns StatisticDuration
         */
        static fromObject(object: { [k: string]: any }): inference.StatisticDuration;

        /**
         * Creates a plain object from a StatisticDuration message. Also converts values to other types if specified.
         * @param message StatisticDuration
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.StatisticDuration, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this StatisticDuration to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace StatisticDuration {

        /** Properties of a StatisticDuration. */
        interface $Properties {

            /** StatisticDuration count */
            count?: (number|Long|null);

            /** StatisticDuration ns */
            ns?: (number|Long|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a StatisticDuration. */
        type $Shape = inference.StatisticDuration.$Properties;
    }

    /**
     * Properties of an InferStatistics.
     * @deprecated Use inference.InferStatistics.$Properties instead.
     */
    interface IInferStatistics extends inference.InferStatistics.$Properties {
    }

    /** Represents an InferStatistics. */
    class InferStatistics {

        /**
         * Constructs a new InferStatistics.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.InferStatistics.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** InferStatistics success. */
        success?: (inference.StatisticDuration.$Properties|null);

        /** InferStatistics fail. */
        fail?: (inference.StatisticDuration.$Properties|null);

        /** InferStatistics queue. */
        queue?: (inference.StatisticDuration.$Properties|null);

        /** InferStatistics compute_input. */
        compute_input?: (inference.StatisticDuration.$Properties|null);

        /** InferStatistics compute_infer. */
        compute_infer?: (inference.StatisticDuration.$Properties|null);

        /** InferStatistics compute_output. */
        compute_output?: (inference.StatisticDuration.$Properties|null);

        /** InferStatistics cache_hit. */
        cache_hit?: (inference.StatisticDuration.$Properties|null);

        /** InferStatistics cache_miss. */
        cache_miss?: (inference.StatisticDuration.$Properties|null);

        /**
         * Creates a new InferStatistics instance using the specified properties.
         * @param [properties] Properties to set
         * @returns InferStatistics instance
         */
        static create(properties: inference.InferStatistics.$Shape): inference.InferStatistics & inference.InferStatistics.$Shape;
        static create(properties?: inference.InferStatistics.$Properties): inference.InferStatistics;

        /**
         * Encodes the specified InferStatistics message. Does not implicitly {@link inference.InferStatistics.verify|verify} messages.
         * @param message InferStatistics message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.InferStatistics.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes an InferStatistics message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.InferStatistics & inference.InferStatistics.$Shape} InferStatistics
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.InferStatistics & inference.InferStatistics.$Shape;

        /**
         * Creates an InferStatistics message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns InferStatistics
         */
        static fromObject(object: { [k: string]: any }): inference.InferStatistics;

        /**
         * Creates a plain object from an InferStatistics message. Also converts values to other types if specified.
         * @param message InferStatistics
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.InferStatistics, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this InferStatistics to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace InferStatistics {

        /** Properties of an InferStatistics. */
        interface $Properties {

            /** InferStatistics success */
            success?: (inference.StatisticDuration.$Properties|null);

            /** InferStatistics fail */
            fail?: (inference.StatisticDuration.$Properties|null);

            /** InferStatistics queue */
            queue?: (inference.StatisticDuration.$Properties|null);

            /** InferStatistics compute_input */
            compute_input?: (inference.StatisticDuration.$Properties|null);

            /** InferStatistics compute_infer */
            compute_infer?: (inference.StatisticDuration.$Properties|null);

            /** InferStatistics compute_output */
            compute_output?: (inference.StatisticDuration.$Properties|null);

            /** InferStatistics cache_hit */
            cache_hit?: (inference.StatisticDuration.$Properties|null);

            /** InferStatistics cache_miss */
            cache_miss?: (inference.StatisticDuration.$Properties|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of an InferStatistics. */
        type $Shape = inference.InferStatistics.$Properties;
    }

    /**
     * Properties of an InferResponseStatistics.
     * @deprecated Use inference.InferResponseStatistics.$Properties instead.
     */
    interface IInferResponseStatistics extends inference.InferResponseStatistics.$Properties {
    }

    /** Represents an InferResponseStatistics. */
    class InferResponseStatistics {

        /**
         * Constructs a new InferResponseStatistics.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.InferResponseStatistics.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** InferResponseStatistics compute_infer. */
        compute_infer?: (inference.StatisticDuration.$Properties|null);

        /** InferResponseStatistics compute_output. */
        compute_output?: (inference.StatisticDuration.$Properties|null);

        /** InferResponseStatistics success. */
        success?: (inference.StatisticDuration.$Properties|null);

        /** InferResponseStatistics fail. */
        fail?: (inference.StatisticDuration.$Properties|null);

        /** InferResponseStatistics empty_response. */
        empty_response?: (inference.StatisticDuration.$Properties|null);

        /** InferResponseStatistics cancel. */
        cancel?: (inference.StatisticDuration.$Properties|null);

        /**
         * Creates a new InferResponseStatistics instance using the specified properties.
         * @param [properties] Properties to set
         * @returns InferResponseStatistics instance
         */
        static create(properties: inference.InferResponseStatistics.$Shape): inference.InferResponseStatistics & inference.InferResponseStatistics.$Shape;
        static create(properties?: inference.InferResponseStatistics.$Properties): inference.InferResponseStatistics;

        /**
         * Encodes the specified InferResponseStatistics message. Does not implicitly {@link inference.InferResponseStatistics.verify|verify} messages.
         * @param message InferResponseStatistics message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.InferResponseStatistics.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes an InferResponseStatistics message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.InferResponseStatistics & inference.InferResponseStatistics.$Shape} InferResponseStatistics
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.InferResponseStatistics & inference.InferResponseStatistics.$Shape;

        /**
         * Creates an InferResponseStatistics message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns InferResponseStatistics
         */
        static fromObject(object: { [k: string]: any }): inference.InferResponseStatistics;

        /**
         * Creates a plain object from an InferResponseStatistics message. Also converts values to other types if specified.
         * @param message InferResponseStatistics
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.InferResponseStatistics, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this InferResponseStatistics to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace InferResponseStatistics {

        /** Properties of an InferResponseStatistics. */
        interface $Properties {

            /** InferResponseStatistics compute_infer */
            compute_infer?: (inference.StatisticDuration.$Properties|null);

            /** InferResponseStatistics compute_output */
            compute_output?: (inference.StatisticDuration.$Properties|null);

            /** InferResponseStatistics success */
            success?: (inference.StatisticDuration.$Properties|null);

            /** InferResponseStatistics fail */
            fail?: (inference.StatisticDuration.$Properties|null);

            /** InferResponseStatistics empty_response */
            empty_response?: (inference.StatisticDuration.$Properties|null);

            /** InferResponseStatistics cancel */
            cancel?: (inference.StatisticDuration.$Properties|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of an InferResponseStatistics. */
        type $Shape = inference.InferResponseStatistics.$Properties;
    }

    /**
     * Properties of an InferBatchStatistics.
     * @deprecated Use inference.InferBatchStatistics.$Properties instead.
     */
    interface IInferBatchStatistics extends inference.InferBatchStatistics.$Properties {
    }

    /** Represents an InferBatchStatistics. */
    class InferBatchStatistics {

        /**
         * Constructs a new InferBatchStatistics.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.InferBatchStatistics.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** InferBatchStatistics batch_size. */
        batch_size: (number|Long);

        /** InferBatchStatistics compute_input. */
        compute_input?: (inference.StatisticDuration.$Properties|null);

        /** InferBatchStatistics compute_infer. */
        compute_infer?: (inference.StatisticDuration.$Properties|null);

        /** InferBatchStatistics compute_output. */
        compute_output?: (inference.StatisticDuration.$Properties|null);

        /**
         * Creates a new InferBatchStatistics instance using the specified properties.
         * @param [properties] Properties to set
         * @returns InferBatchStatistics instance
         */
        static create(properties: inference.InferBatchStatistics.$Shape): inference.InferBatchStatistics & inference.InferBatchStatistics.$Shape;
        static create(properties?: inference.InferBatchStatistics.$Properties): inference.InferBatchStatistics;

        /**
         * Encodes the specified InferBatchStatistics message. Does not implicitly {@link inference.InferBatchStatistics.verify|verify} messages.
         * @param message InferBatchStatistics message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.InferBatchStatistics.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes an InferBatchStatistics message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.InferBatchStatistics & inference.InferBatchStatistics.$Shape} InferBatchStatistics
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.InferBatchStatistics & inference.InferBatchStatistics.$Shape;

        /**
         * Creates an InferBatchStatistics message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns InferBatchStatistics
         */
        static fromObject(object: { [k: string]: any }): inference.InferBatchStatistics;

        /**
         * Creates a plain object from an InferBatchStatistics message. Also converts values to other types if specified.
         * @param message InferBatchStatistics
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.InferBatchStatistics, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this InferBatchStatistics to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace InferBatchStatistics {

        /** Properties of an InferBatchStatistics. */
        interface $Properties {

            /** InferBatchStatistics batch_size */
            batch_size?: (number|Long|null);

            /** InferBatchStatistics compute_input */
            compute_input?: (inference.StatisticDuration.$Properties|null);

            /** InferBatchStatistics compute_infer */
            compute_infer?: (inference.StatisticDuration.$Properties|null);

            /** InferBatchStatistics compute_output */
            compute_output?: (inference.StatisticDuration.$Properties|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of an InferBatchStatistics. */
        type $Shape = inference.InferBatchStatistics.$Properties;
    }

    /**
     * Properties of a MemoryUsage.
     * @deprecated Use inference.MemoryUsage.$Properties instead.
     */
    interface IMemoryUsage extends inference.MemoryUsage.$Properties {
    }

    /** Represents a MemoryUsage. */
    class MemoryUsage {

        /**
         * Constructs a new MemoryUsage.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.MemoryUsage.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** MemoryUsage type. */
        type: string;

        /** MemoryUsage id. */
        id: (number|Long);

        /** MemoryUsage byte_size. */
        byte_size: (number|Long);

        /**
         * Creates a new MemoryUsage instance using the specified properties.
         * @param [properties] Properties to set
         * @returns MemoryUsage instance
         */
        static create(properties: inference.MemoryUsage.$Shape): inference.MemoryUsage & inference.MemoryUsage.$Shape;
        static create(properties?: inference.MemoryUsage.$Properties): inference.MemoryUsage;

        /**
         * Encodes the specified MemoryUsage message. Does not implicitly {@link inference.MemoryUsage.verify|verify} messages.
         * @param message MemoryUsage message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.MemoryUsage.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a MemoryUsage message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.MemoryUsage & inference.MemoryUsage.$Shape} MemoryUsage
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.MemoryUsage & inference.MemoryUsage.$Shape;

        /**
         * Creates a MemoryUsage message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns MemoryUsage
         */
        static fromObject(object: { [k: string]: any }): inference.MemoryUsage;

        /**
         * Creates a plain object from a MemoryUsage message. Also converts values to other types if specified.
         * @param message MemoryUsage
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.MemoryUsage, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this MemoryUsage to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace MemoryUsage {

        /** Properties of a MemoryUsage. */
        interface $Properties {

            /** MemoryUsage type */
            type?: (string|null);

            /** MemoryUsage id */
            id?: (number|Long|null);

            /** MemoryUsage byte_size */
            byte_size?: (number|Long|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a MemoryUsage. */
        type $Shape = inference.MemoryUsage.$Properties;
    }

    /**
     * Properties of a ModelStatistics.
     * @deprecated Use inference.ModelStatistics.$Properties instead.
     */
    interface IModelStatistics extends inference.ModelStatistics.$Properties {
    }

    /** Represents a ModelStatistics. */
    class ModelStatistics {

        /**
         * Constructs a new ModelStatistics.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelStatistics.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelStatistics name. */
        name: string;

        /** ModelStatistics version. */
        version: string;

        /** ModelStatistics last_inference. */
        last_inference: (number|Long);

        /** ModelStatistics inference_count. */
        inference_count: (number|Long);

        /** ModelStatistics execution_count. */
        execution_count: (number|Long);

        /** ModelStatistics inference_stats. */
        inference_stats?: (inference.InferStatistics.$Properties|null);

        /** ModelStatistics batch_stats. */
        batch_stats: inference.InferBatchStatistics.$Properties[];

        /** ModelStatistics memory_usage. */
        memory_usage: inference.MemoryUsage.$Properties[];

        /** ModelStatistics response_stats. */
        response_stats: { [k: string]: inference.InferResponseStatistics.$Properties };

        /**
         * Creates a new ModelStatistics instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelStatistics instance
         */
        static create(properties: inference.ModelStatistics.$Shape): inference.ModelStatistics & inference.ModelStatistics.$Shape;
        static create(properties?: inference.ModelStatistics.$Properties): inference.ModelStatistics;

        /**
         * Encodes the specified ModelStatistics message. Does not implicitly {@link inference.ModelStatistics.verify|verify} messages.
         * @param message ModelStatistics message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelStatistics.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelStatistics message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelStatistics & inference.ModelStatistics.$Shape} ModelStatistics
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelStatistics & inference.ModelStatistics.$Shape;

        /**
         * Creates a ModelStatistics message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelStatistics
         */
        static fromObject(object: { [k: string]: any }): inference.ModelStatistics;

        /**
         * Creates a plain object from a ModelStatistics message. Also converts values to other types if specified.
         * @param message ModelStatistics
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelStatistics, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelStatistics to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelStatistics {

        /** Properties of a ModelStatistics. */
        interface $Properties {

            /** ModelStatistics name */
            name?: (string|null);

            /** ModelStatistics version */
            version?: (string|null);

            /** ModelStatistics last_inference */
            last_inference?: (number|Long|null);

            /** ModelStatistics inference_count */
            inference_count?: (number|Long|null);

            /** ModelStatistics execution_count */
            execution_count?: (number|Long|null);

            /** ModelStatistics inference_stats */
            inference_stats?: (inference.InferStatistics.$Properties|null);

            /** ModelStatistics batch_stats */
            batch_stats?: (inference.InferBatchStatistics.$Properties[]|null);

            /** ModelStatistics memory_usage */
            memory_usage?: (inference.MemoryUsage.$Properties[]|null);

            /** ModelStatistics response_stats */
            response_stats?: ({ [k: string]: inference.InferResponseStatistics.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelStatistics. */
        type $Shape = inference.ModelStatistics.$Properties;
    }

    /**
     * Properties of a ModelStatisticsResponse.
     * @deprecated Use inference.ModelStatisticsResponse.$Properties instead.
     */
    interface IModelStatisticsResponse extends inference.ModelStatisticsResponse.$Properties {
    }

    /** Represents a ModelStatisticsResponse. */
    class ModelStatisticsResponse {

        /**
         * Constructs a new ModelStatisticsResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelStatisticsResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelStatisticsResponse model_stats. */
        model_stats: inference.ModelStatistics.$Properties[];

        /**
         * Creates a new ModelStatisticsResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelStatisticsResponse instance
         */
        static create(properties: inference.ModelStatisticsResponse.$Shape): inference.ModelStatisticsResponse & inference.ModelStatisticsResponse.$Shape;
        static create(properties?: inference.ModelStatisticsResponse.$Properties): inference.ModelStatisticsResponse;

        /**
         * Encodes the specified ModelStatisticsResponse message. Does not implicitly {@link inference.ModelStatisticsResponse.verify|verify} messages.
         * @param message ModelStatisticsResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelStatisticsResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelStatisticsResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelStatisticsResponse & inference.ModelStatisticsResponse.$Shape} ModelStatisticsResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelStatisticsResponse & inference.ModelStatisticsResponse.$Shape;

        /**
         * Creates a ModelStatisticsResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelStatisticsResponse
         */
        static fromObject(object: { [k: string]: any }): inference.ModelStatisticsResponse;

        /**
         * Creates a plain object from a ModelStatisticsResponse message. Also converts values to other types if specified.
         * @param message ModelStatisticsResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelStatisticsResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelStatisticsResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelStatisticsResponse {

        /** Properties of a ModelStatisticsResponse. */
        interface $Properties {

            /** ModelStatisticsResponse model_stats */
            model_stats?: (inference.ModelStatistics.$Properties[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelStatisticsResponse. */
        type $Shape = inference.ModelStatisticsResponse.$Properties;
    }

    /**
     * Properties of a ModelRepositoryParameter.
     * @deprecated Use inference.ModelRepositoryParameter.$Properties instead.
     */
    interface IModelRepositoryParameter extends inference.ModelRepositoryParameter.$Properties {
    }

    /** Represents a ModelRepositoryParameter. */
    class ModelRepositoryParameter {

        /**
         * Constructs a new ModelRepositoryParameter.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelRepositoryParameter.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelRepositoryParameter bool_param. */
        bool_param?: (boolean|null);

        /** ModelRepositoryParameter int64_param. */
        int64_param?: (number|Long|null);

        /** ModelRepositoryParameter string_param. */
        string_param?: (string|null);

        /** ModelRepositoryParameter bytes_param. */
        bytes_param?: (Uint8Array|null);

        /** ModelRepositoryParameter parameter_choice. */
        parameter_choice?: ("bool_param"|"int64_param"|"string_param"|"bytes_param");

        /**
         * Creates a new ModelRepositoryParameter instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelRepositoryParameter instance
         */
        static create(properties: inference.ModelRepositoryParameter.$Shape): inference.ModelRepositoryParameter & inference.ModelRepositoryParameter.$Shape;
        static create(properties?: inference.ModelRepositoryParameter.$Properties): inference.ModelRepositoryParameter;

        /**
         * Encodes the specified ModelRepositoryParameter message. Does not implicitly {@link inference.ModelRepositoryParameter.verify|verify} messages.
         * @param message ModelRepositoryParameter message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelRepositoryParameter.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelRepositoryParameter message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelRepositoryParameter & inference.ModelRepositoryParameter.$Shape} ModelRepositoryParameter
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelRepositoryParameter & inference.ModelRepositoryParameter.$Shape;

        /**
         * Creates a ModelRepositoryParameter message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelRepositoryParameter
         */
        static fromObject(object: { [k: string]: any }): inference.ModelRepositoryParameter;

        /**
         * Creates a plain object from a ModelRepositoryParameter message. Also converts values to other types if specified.
         * @param message ModelRepositoryParameter
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelRepositoryParameter, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelRepositoryParameter to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelRepositoryParameter {

        /** Properties of a ModelRepositoryParameter. */
        interface $Properties {

            /** ModelRepositoryParameter bool_param */
            bool_param?: (boolean|null);

            /** ModelRepositoryParameter int64_param */
            int64_param?: (number|Long|null);

            /** ModelRepositoryParameter string_param */
            string_param?: (string|null);

            /** ModelRepositoryParameter bytes_param */
            bytes_param?: (Uint8Array|null);

            /** ModelRepositoryParameter parameter_choice */
            parameter_choice?: ("bool_param"|"int64_param"|"string_param"|"bytes_param");

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Narrowed shape of a ModelRepositoryParameter. */
        type $Shape = {
          bool_param?: boolean|null;
          int64_param?: number|Long|null;
          string_param?: string|null;
          bytes_param?: Uint8Array|null;
          $unknowns?: Uint8Array[];
        } & (
          ({ parameter_choice?: undefined; bool_param?: null; int64_param?: null; string_param?: null; bytes_param?: null }|{ parameter_choice?: "bool_param"; bool_param: boolean; int64_param?: null; string_param?: null; bytes_param?: null }|{ parameter_choice?: "int64_param"; bool_param?: null; int64_param: number|Long; string_param?: null; bytes_param?: null }|{ parameter_choice?: "string_param"; bool_param?: null; int64_param?: null; string_param: string; bytes_param?: null }|{ parameter_choice?: "bytes_param"; bool_param?: null; int64_param?: null; string_param?: null; bytes_param: Uint8Array })
        );
    }

    /**
     * Properties of a RepositoryIndexRequest.
     * @deprecated Use inference.RepositoryIndexRequest.$Properties instead.
     */
    interface IRepositoryIndexRequest extends inference.RepositoryIndexRequest.$Properties {
    }

    /** Represents a RepositoryIndexRequest. */
    class RepositoryIndexRequest {

        /**
         * Constructs a new RepositoryIndexRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.RepositoryIndexRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** RepositoryIndexRequest repository_name. */
        repository_name: string;

        /** RepositoryIndexRequest ready. */
        ready: boolean;

        /**
         * Creates a new RepositoryIndexRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns RepositoryIndexRequest instance
         */
        static create(properties: inference.RepositoryIndexRequest.$Shape): inference.RepositoryIndexRequest & inference.RepositoryIndexRequest.$Shape;
        static create(properties?: inference.RepositoryIndexRequest.$Properties): inference.RepositoryIndexRequest;

        /**
         * Encodes the specified RepositoryIndexRequest message. Does not implicitly {@link inference.RepositoryIndexRequest.verify|verify} messages.
         * @param message RepositoryIndexRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.RepositoryIndexRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a RepositoryIndexRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.RepositoryIndexRequest & inference.RepositoryIndexRequest.$Shape} RepositoryIndexRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.RepositoryIndexRequest & inference.RepositoryIndexRequest.$Shape;

        /**
         * Creates a RepositoryIndexRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns RepositoryIndexRequest
         */
        static fromObject(object: { [k: string]: any }): inference.RepositoryIndexRequest;

        /**
         * Creates a plain object from a RepositoryIndexRequest message. Also converts values to other types if specified.
         * @param message RepositoryIndexRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.RepositoryIndexRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this RepositoryIndexRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace RepositoryIndexRequest {

        /** Properties of a RepositoryIndexRequest. */
        interface $Properties {

            /** RepositoryIndexRequest repository_name */
            repository_name?: (string|null);

            /** RepositoryIndexRequest ready */
            ready?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a RepositoryIndexRequest. */
        type $Shape = inference.RepositoryIndexRequest.$Properties;
    }

    /**
     * Properties of a RepositoryIndexResponse.
     * @deprecated Use inference.RepositoryIndexResponse.$Properties instead.
     */
    interface IRepositoryIndexResponse extends inference.RepositoryIndexResponse.$Properties {
    }

    /** Represents a RepositoryIndexResponse. */
    class RepositoryIndexResponse {

        /**
         * Constructs a new RepositoryIndexResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.RepositoryIndexResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** RepositoryIndexResponse models. */
        models: inference.RepositoryIndexResponse.ModelIndex.$Properties[];

        /**
         * Creates a new RepositoryIndexResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns RepositoryIndexResponse instance
         */
        static create(properties: inference.RepositoryIndexResponse.$Shape): inference.RepositoryIndexResponse & inference.RepositoryIndexResponse.$Shape;
        static create(properties?: inference.RepositoryIndexResponse.$Properties): inference.RepositoryIndexResponse;

        /**
         * Encodes the specified RepositoryIndexResponse message. Does not implicitly {@link inference.RepositoryIndexResponse.verify|verify} messages.
         * @param message RepositoryIndexResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.RepositoryIndexResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a RepositoryIndexResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.RepositoryIndexResponse & inference.RepositoryIndexResponse.$Shape} RepositoryIndexResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.RepositoryIndexResponse & inference.RepositoryIndexResponse.$Shape;

        /**
         * Creates a RepositoryIndexResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns RepositoryIndexResponse
         */
        static fromObject(object: { [k: string]: any }): inference.RepositoryIndexResponse;

        /**
         * Creates a plain object from a RepositoryIndexResponse message. Also converts values to other types if specified.
         * @param message RepositoryIndexResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.RepositoryIndexResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this RepositoryIndexResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace RepositoryIndexResponse {

        /** Properties of a RepositoryIndexResponse. */
        interface $Properties {

            /** RepositoryIndexResponse models */
            models?: (inference.RepositoryIndexResponse.ModelIndex.$Properties[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a RepositoryIndexResponse. */
        type $Shape = inference.RepositoryIndexResponse.$Properties;

        /**
         * Properties of a ModelIndex.
         * @deprecated Use inference.RepositoryIndexResponse.ModelIndex.$Properties instead.
         */
        interface IModelIndex extends inference.RepositoryIndexResponse.ModelIndex.$Properties {
        }

        /** Represents a ModelIndex. */
        class ModelIndex {

            /**
             * Constructs a new ModelIndex.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.RepositoryIndexResponse.ModelIndex.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** ModelIndex name. */
            name: string;

            /** ModelIndex version. */
            version: string;

            /** ModelIndex state. */
            state: string;

            /** ModelIndex reason. */
            reason: string;

            /**
             * Creates a new ModelIndex instance using the specified properties.
             * @param [properties] Properties to set
             * @returns ModelIndex instance
             */
            static create(properties: inference.RepositoryIndexResponse.ModelIndex.$Shape): inference.RepositoryIndexResponse.ModelIndex & inference.RepositoryIndexResponse.ModelIndex.$Shape;
            static create(properties?: inference.RepositoryIndexResponse.ModelIndex.$Properties): inference.RepositoryIndexResponse.ModelIndex;

            /**
             * Encodes the specified ModelIndex message. Does not implicitly {@link inference.RepositoryIndexResponse.ModelIndex.verify|verify} messages.
             * @param message ModelIndex message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.RepositoryIndexResponse.ModelIndex.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a ModelIndex message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.RepositoryIndexResponse.ModelIndex & inference.RepositoryIndexResponse.ModelIndex.$Shape} ModelIndex
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.RepositoryIndexResponse.ModelIndex & inference.RepositoryIndexResponse.ModelIndex.$Shape;

            /**
             * Creates a ModelIndex message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns ModelIndex
             */
            static fromObject(object: { [k: string]: any }): inference.RepositoryIndexResponse.ModelIndex;

            /**
             * Creates a plain object from a ModelIndex message. Also converts values to other types if specified.
             * @param message ModelIndex
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.RepositoryIndexResponse.ModelIndex, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this ModelIndex to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace ModelIndex {

            /** Properties of a ModelIndex. */
            interface $Properties {

                /** ModelIndex name */
                name?: (string|null);

                /** ModelIndex version */
                version?: (string|null);

                /** ModelIndex state */
                state?: (string|null);

                /** ModelIndex reason */
                reason?: (string|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a ModelIndex. */
            type $Shape = inference.RepositoryIndexResponse.ModelIndex.$Properties;
        }
    }

    /**
     * Properties of a RepositoryModelLoadRequest.
     * @deprecated Use inference.RepositoryModelLoadRequest.$Properties instead.
     */
    interface IRepositoryModelLoadRequest extends inference.RepositoryModelLoadRequest.$Properties {
    }

    /** Represents a RepositoryModelLoadRequest. */
    class RepositoryModelLoadRequest {

        /**
         * Constructs a new RepositoryModelLoadRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.RepositoryModelLoadRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** RepositoryModelLoadRequest repository_name. */
        repository_name: string;

        /** RepositoryModelLoadRequest model_name. */
        model_name: string;

        /** RepositoryModelLoadRequest parameters. */
        parameters: { [k: string]: inference.ModelRepositoryParameter.$Properties };

        /**
         * Creates a new RepositoryModelLoadRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns RepositoryModelLoadRequest instance
         */
        static create(properties: inference.RepositoryModelLoadRequest.$Shape): inference.RepositoryModelLoadRequest & inference.RepositoryModelLoadRequest.$Shape;
        static create(properties?: inference.RepositoryModelLoadRequest.$Properties): inference.RepositoryModelLoadRequest;

        /**
         * Encodes the specified RepositoryModelLoadRequest message. Does not implicitly {@link inference.RepositoryModelLoadRequest.verify|verify} messages.
         * @param message RepositoryModelLoadRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.RepositoryModelLoadRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a RepositoryModelLoadRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.RepositoryModelLoadRequest & inference.RepositoryModelLoadRequest.$Shape} RepositoryModelLoadRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.RepositoryModelLoadRequest & inference.RepositoryModelLoadRequest.$Shape;

        /**
         * Creates a RepositoryModelLoadRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns RepositoryModelLoadRequest
         */
        static fromObject(object: { [k: string]: any }): inference.RepositoryModelLoadRequest;

        /**
         * Creates a plain object from a RepositoryModelLoadRequest message. Also converts values to other types if specified.
         * @param message RepositoryModelLoadRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.RepositoryModelLoadRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this RepositoryModelLoadRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace RepositoryModelLoadRequest {

        /** Properties of a RepositoryModelLoadRequest. */
        interface $Properties {

            /** RepositoryModelLoadRequest repository_name */
            repository_name?: (string|null);

            /** RepositoryModelLoadRequest model_name */
            model_name?: (string|null);

            /** RepositoryModelLoadRequest parameters */
            parameters?: ({ [k: string]: inference.ModelRepositoryParameter.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a RepositoryModelLoadRequest. */
        type $Shape = {
          repository_name?: string|null;
          model_name?: string|null;
          parameters?: { [k: string]: inference.ModelRepositoryParameter.$Shape }|null;
          $unknowns?: Uint8Array[];
        };
    }

    /**
     * Properties of a RepositoryModelLoadResponse.
     * @deprecated Use inference.RepositoryModelLoadResponse.$Properties instead.
     */
    interface IRepositoryModelLoadResponse extends inference.RepositoryModelLoadResponse.$Properties {
    }

    /** Represents a RepositoryModelLoadResponse. */
    class RepositoryModelLoadResponse {

        /**
         * Constructs a new RepositoryModelLoadResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.RepositoryModelLoadResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new RepositoryModelLoadResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns RepositoryModelLoadResponse instance
         */
        static create(properties: inference.RepositoryModelLoadResponse.$Shape): inference.RepositoryModelLoadResponse & inference.RepositoryModelLoadResponse.$Shape;
        static create(properties?: inference.RepositoryModelLoadResponse.$Properties): inference.RepositoryModelLoadResponse;

        /**
         * Encodes the specified RepositoryModelLoadResponse message. Does not implicitly {@link inference.RepositoryModelLoadResponse.verify|verify} messages.
         * @param message RepositoryModelLoadResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.RepositoryModelLoadResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a RepositoryModelLoadResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.RepositoryModelLoadResponse & inference.RepositoryModelLoadResponse.$Shape} RepositoryModelLoadResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.RepositoryModelLoadResponse & inference.RepositoryModelLoadResponse.$Shape;

        /**
         * Creates a RepositoryModelLoadResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns RepositoryModelLoadResponse
         */
        static fromObject(object: { [k: string]: any }): inference.RepositoryModelLoadResponse;

        /**
         * Creates a plain object from a RepositoryModelLoadResponse message. Also converts values to other types if specified.
         * @param message RepositoryModelLoadResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.RepositoryModelLoadResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this RepositoryModelLoadResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace RepositoryModelLoadResponse {

        /** Properties of a RepositoryModelLoadResponse. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a RepositoryModelLoadResponse. */
        type $Shape = inference.RepositoryModelLoadResponse.$Properties;
    }

    /**
     * Properties of a RepositoryModelUnloadRequest.
     * @deprecated Use inference.RepositoryModelUnloadRequest.$Properties instead.
     */
    interface IRepositoryModelUnloadRequest extends inference.RepositoryModelUnloadRequest.$Properties {
    }

    /** Represents a RepositoryModelUnloadRequest. */
    class RepositoryModelUnloadRequest {

        /**
         * Constructs a new RepositoryModelUnloadRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.RepositoryModelUnloadRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** RepositoryModelUnloadRequest repository_name. */
        repository_name: string;

        /** RepositoryModelUnloadRequest model_name. */
        model_name: string;

        /** RepositoryModelUnloadRequest parameters. */
        parameters: { [k: string]: inference.ModelRepositoryParameter.$Properties };

        /**
         * Creates a new RepositoryModelUnloadRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns RepositoryModelUnloadRequest instance
         */
        static create(properties: inference.RepositoryModelUnloadRequest.$Shape): inference.RepositoryModelUnloadRequest & inference.RepositoryModelUnloadRequest.$Shape;
        static create(properties?: inference.RepositoryModelUnloadRequest.$Properties): inference.RepositoryModelUnloadRequest;

        /**
         * Encodes the specified RepositoryModelUnloadRequest message. Does not implicitly {@link inference.RepositoryModelUnloadRequest.verify|verify} messages.
         * @param message RepositoryModelUnloadRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.RepositoryModelUnloadRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a RepositoryModelUnloadRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.RepositoryModelUnloadRequest & inference.RepositoryModelUnloadRequest.$Shape} RepositoryModelUnloadRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.RepositoryModelUnloadRequest & inference.RepositoryModelUnloadRequest.$Shape;

        /**
         * Creates a RepositoryModelUnloadRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns RepositoryModelUnloadRequest
         */
        static fromObject(object: { [k: string]: any }): inference.RepositoryModelUnloadRequest;

        /**
         * Creates a plain object from a RepositoryModelUnloadRequest message. Also converts values to other types if specified.
         * @param message RepositoryModelUnloadRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.RepositoryModelUnloadRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this RepositoryModelUnloadRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace RepositoryModelUnloadRequest {

        /** Properties of a RepositoryModelUnloadRequest. */
        interface $Properties {

            /** RepositoryModelUnloadRequest repository_name */
            repository_name?: (string|null);

            /** RepositoryModelUnloadRequest model_name */
            model_name?: (string|null);

            /** RepositoryModelUnloadRequest parameters */
            parameters?: ({ [k: string]: inference.ModelRepositoryParameter.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a RepositoryModelUnloadRequest. */
        type $Shape = {
          repository_name?: string|null;
          model_name?: string|null;
          parameters?: { [k: string]: inference.ModelRepositoryParameter.$Shape }|null;
          $unknowns?: Uint8Array[];
        };
    }

    /**
     * Properties of a RepositoryModelUnloadResponse.
     * @deprecated Use inference.RepositoryModelUnloadResponse.$Properties instead.
     */
    interface IRepositoryModelUnloadResponse extends inference.RepositoryModelUnloadResponse.$Properties {
    }

    /** Represents a RepositoryModelUnloadResponse. */
    class RepositoryModelUnloadResponse {

        /**
         * Constructs a new RepositoryModelUnloadResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.RepositoryModelUnloadResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new RepositoryModelUnloadResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns RepositoryModelUnloadResponse instance
         */
        static create(properties: inference.RepositoryModelUnloadResponse.$Shape): inference.RepositoryModelUnloadResponse & inference.RepositoryModelUnloadResponse.$Shape;
        static create(properties?: inference.RepositoryModelUnloadResponse.$Properties): inference.RepositoryModelUnloadResponse;

        /**
         * Encodes the specified RepositoryModelUnloadResponse message. Does not implicitly {@link inference.RepositoryModelUnloadResponse.verify|verify} messages.
         * @param message RepositoryModelUnloadResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.RepositoryModelUnloadResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a RepositoryModelUnloadResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.RepositoryModelUnloadResponse & inference.RepositoryModelUnloadResponse.$Shape} RepositoryModelUnloadResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.RepositoryModelUnloadResponse & inference.RepositoryModelUnloadResponse.$Shape;

        /**
         * Creates a RepositoryModelUnloadResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns RepositoryModelUnloadResponse
         */
        static fromObject(object: { [k: string]: any }): inference.RepositoryModelUnloadResponse;

        /**
         * Creates a plain object from a RepositoryModelUnloadResponse message. Also converts values to other types if specified.
         * @param message RepositoryModelUnloadResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.RepositoryModelUnloadResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this RepositoryModelUnloadResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace RepositoryModelUnloadResponse {

        /** Properties of a RepositoryModelUnloadResponse. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a RepositoryModelUnloadResponse. */
        type $Shape = inference.RepositoryModelUnloadResponse.$Properties;
    }

    /**
     * Properties of a SystemSharedMemoryStatusRequest.
     * @deprecated Use inference.SystemSharedMemoryStatusRequest.$Properties instead.
     */
    interface ISystemSharedMemoryStatusRequest extends inference.SystemSharedMemoryStatusRequest.$Properties {
    }

    /** Represents a SystemSharedMemoryStatusRequest. */
    class SystemSharedMemoryStatusRequest {

        /**
         * Constructs a new SystemSharedMemoryStatusRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.SystemSharedMemoryStatusRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** SystemSharedMemoryStatusRequest name. */
        name: string;

        /**
         * Creates a new SystemSharedMemoryStatusRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns SystemSharedMemoryStatusRequest instance
         */
        static create(properties: inference.SystemSharedMemoryStatusRequest.$Shape): inference.SystemSharedMemoryStatusRequest & inference.SystemSharedMemoryStatusRequest.$Shape;
        static create(properties?: inference.SystemSharedMemoryStatusRequest.$Properties): inference.SystemSharedMemoryStatusRequest;

        /**
         * Encodes the specified SystemSharedMemoryStatusRequest message. Does not implicitly {@link inference.SystemSharedMemoryStatusRequest.verify|verify} messages.
         * @param message SystemSharedMemoryStatusRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.SystemSharedMemoryStatusRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a SystemSharedMemoryStatusRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.SystemSharedMemoryStatusRequest & inference.SystemSharedMemoryStatusRequest.$Shape} SystemSharedMemoryStatusRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.SystemSharedMemoryStatusRequest & inference.SystemSharedMemoryStatusRequest.$Shape;

        /**
         * Creates a SystemSharedMemoryStatusRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns SystemSharedMemoryStatusRequest
         */
        static fromObject(object: { [k: string]: any }): inference.SystemSharedMemoryStatusRequest;

        /**
         * Creates a plain object from a SystemSharedMemoryStatusRequest message. Also converts values to other types if specified.
         * @param message SystemSharedMemoryStatusRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.SystemSharedMemoryStatusRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this SystemSharedMemoryStatusRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace SystemSharedMemoryStatusRequest {

        /** Properties of a SystemSharedMemoryStatusRequest. */
        interface $Properties {

            /** SystemSharedMemoryStatusRequest name */
            name?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a SystemSharedMemoryStatusRequest. */
        type $Shape = inference.SystemSharedMemoryStatusRequest.$Properties;
    }

    /**
     * Properties of a SystemSharedMemoryStatusResponse.
     * @deprecated Use inference.SystemSharedMemoryStatusResponse.$Properties instead.
     */
    interface ISystemSharedMemoryStatusResponse extends inference.SystemSharedMemoryStatusResponse.$Properties {
    }

    /** Represents a SystemSharedMemoryStatusResponse. */
    class SystemSharedMemoryStatusResponse {

        /**
         * Constructs a new SystemSharedMemoryStatusResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.SystemSharedMemoryStatusResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** SystemSharedMemoryStatusResponse regions. */
        regions: { [k: string]: inference.SystemSharedMemoryStatusResponse.RegionStatus.$Properties };

        /**
         * Creates a new SystemSharedMemoryStatusResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns SystemSharedMemoryStatusResponse instance
         */
        static create(properties: inference.SystemSharedMemoryStatusResponse.$Shape): inference.SystemSharedMemoryStatusResponse & inference.SystemSharedMemoryStatusResponse.$Shape;
        static create(properties?: inference.SystemSharedMemoryStatusResponse.$Properties): inference.SystemSharedMemoryStatusResponse;

        /**
         * Encodes the specified SystemSharedMemoryStatusResponse message. Does not implicitly {@link inference.SystemSharedMemoryStatusResponse.verify|verify} messages.
         * @param message SystemSharedMemoryStatusResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.SystemSharedMemoryStatusResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a SystemSharedMemoryStatusResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.SystemSharedMemoryStatusResponse & inference.SystemSharedMemoryStatusResponse.$Shape} SystemSharedMemoryStatusResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.SystemSharedMemoryStatusResponse & inference.SystemSharedMemoryStatusResponse.$Shape;

        /**
         * Creates a SystemSharedMemoryStatusResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns SystemSharedMemoryStatusResponse
         */
        static fromObject(object: { [k: string]: any }): inference.SystemSharedMemoryStatusResponse;

        /**
         * Creates a plain object from a SystemSharedMemoryStatusResponse message. Also converts values to other types if specified.
         * @param message SystemSharedMemoryStatusResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.SystemSharedMemoryStatusResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this SystemSharedMemoryStatusResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace SystemSharedMemoryStatusResponse {

        /** Properties of a SystemSharedMemoryStatusResponse. */
        interface $Properties {

            /** SystemSharedMemoryStatusResponse regions */
            regions?: ({ [k: string]: inference.SystemSharedMemoryStatusResponse.RegionStatus.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a SystemSharedMemoryStatusResponse. */
        type $Shape = inference.SystemSharedMemoryStatusResponse.$Properties;

        /**
         * Properties of a RegionStatus.
         * @deprecated Use inference.SystemSharedMemoryStatusResponse.RegionStatus.$Properties instead.
         */
        interface IRegionStatus extends inference.SystemSharedMemoryStatusResponse.RegionStatus.$Properties {
        }

        /** Represents a RegionStatus. */
        class RegionStatus {

            /**
             * Constructs a new RegionStatus.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.SystemSharedMemoryStatusResponse.RegionStatus.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** RegionStatus name. */
            name: string;

            /** RegionStatus key. */
            key: string;

            /** RegionStatus offset. */
            offset: (number|Long);

            /** RegionStatus byte_size. */
            byte_size: (number|Long);

            /**
             * Creates a new RegionStatus instance using the specified properties.
             * @param [properties] Properties to set
             * @returns RegionStatus instance
             */
            static create(properties: inference.SystemSharedMemoryStatusResponse.RegionStatus.$Shape): inference.SystemSharedMemoryStatusResponse.RegionStatus & inference.SystemSharedMemoryStatusResponse.RegionStatus.$Shape;
            static create(properties?: inference.SystemSharedMemoryStatusResponse.RegionStatus.$Properties): inference.SystemSharedMemoryStatusResponse.RegionStatus;

            /**
             * Encodes the specified RegionStatus message. Does not implicitly {@link inference.SystemSharedMemoryStatusResponse.RegionStatus.verify|verify} messages.
             * @param message RegionStatus message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.SystemSharedMemoryStatusResponse.RegionStatus.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a RegionStatus message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.SystemSharedMemoryStatusResponse.RegionStatus & inference.SystemSharedMemoryStatusResponse.RegionStatus.$Shape} RegionStatus
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.SystemSharedMemoryStatusResponse.RegionStatus & inference.SystemSharedMemoryStatusResponse.RegionStatus.$Shape;

            /**
             * Creates a RegionStatus message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns RegionStatus
             */
            static fromObject(object: { [k: string]: any }): inference.SystemSharedMemoryStatusResponse.RegionStatus;

            /**
             * Creates a plain object from a RegionStatus message. Also converts values to other types if specified.
             * @param message RegionStatus
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.SystemSharedMemoryStatusResponse.RegionStatus, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this RegionStatus to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace RegionStatus {

            /** Properties of a RegionStatus. */
            interface $Properties {

                /** RegionStatus name */
                name?: (string|null);

                /** RegionStatus key */
                key?: (string|null);

                /** RegionStatus offset */
                offset?: (number|Long|null);

                /** RegionStatus byte_size */
                byte_size?: (number|Long|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a RegionStatus. */
            type $Shape = inference.SystemSharedMemoryStatusResponse.RegionStatus.$Properties;
        }
    }

    /**
     * Properties of a SystemSharedMemoryRegisterRequest.
     * @deprecated Use inference.SystemSharedMemoryRegisterRequest.$Properties instead.
     */
    interface ISystemSharedMemoryRegisterRequest extends inference.SystemSharedMemoryRegisterRequest.$Properties {
    }

    /** Represents a SystemSharedMemoryRegisterRequest. */
    class SystemSharedMemoryRegisterRequest {

        /**
         * Constructs a new SystemSharedMemoryRegisterRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.SystemSharedMemoryRegisterRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** SystemSharedMemoryRegisterRequest name. */
        name: string;

        /** SystemSharedMemoryRegisterRequest key. */
        key: string;

        /** SystemSharedMemoryRegisterRequest offset. */
        offset: (number|Long);

        /** SystemSharedMemoryRegisterRequest byte_size. */
        byte_size: (number|Long);

        /**
         * Creates a new SystemSharedMemoryRegisterRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns SystemSharedMemoryRegisterRequest instance
         */
        static create(properties: inference.SystemSharedMemoryRegisterRequest.$Shape): inference.SystemSharedMemoryRegisterRequest & inference.SystemSharedMemoryRegisterRequest.$Shape;
        static create(properties?: inference.SystemSharedMemoryRegisterRequest.$Properties): inference.SystemSharedMemoryRegisterRequest;

        /**
         * Encodes the specified SystemSharedMemoryRegisterRequest message. Does not implicitly {@link inference.SystemSharedMemoryRegisterRequest.verify|verify} messages.
         * @param message SystemSharedMemoryRegisterRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.SystemSharedMemoryRegisterRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a SystemSharedMemoryRegisterRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.SystemSharedMemoryRegisterRequest & inference.SystemSharedMemoryRegisterRequest.$Shape} SystemSharedMemoryRegisterRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.SystemSharedMemoryRegisterRequest & inference.SystemSharedMemoryRegisterRequest.$Shape;

        /**
         * Creates a SystemSharedMemoryRegisterRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns SystemSharedMemoryRegisterRequest
         */
        static fromObject(object: { [k: string]: any }): inference.SystemSharedMemoryRegisterRequest;

        /**
         * Creates a plain object from a SystemSharedMemoryRegisterRequest message. Also converts values to other types if specified.
         * @param message SystemSharedMemoryRegisterRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.SystemSharedMemoryRegisterRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this SystemSharedMemoryRegisterRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace SystemSharedMemoryRegisterRequest {

        /** Properties of a SystemSharedMemoryRegisterRequest. */
        interface $Properties {

            /** SystemSharedMemoryRegisterRequest name */
            name?: (string|null);

            /** SystemSharedMemoryRegisterRequest key */
            key?: (string|null);

            /** SystemSharedMemoryRegisterRequest offset */
            offset?: (number|Long|null);

            /** SystemSharedMemoryRegisterRequest byte_size */
            byte_size?: (number|Long|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a SystemSharedMemoryRegisterRequest. */
        type $Shape = inference.SystemSharedMemoryRegisterRequest.$Properties;
    }

    /**
     * Properties of a SystemSharedMemoryRegisterResponse.
     * @deprecated Use inference.SystemSharedMemoryRegisterResponse.$Properties instead.
     */
    interface ISystemSharedMemoryRegisterResponse extends inference.SystemSharedMemoryRegisterResponse.$Properties {
    }

    /** Represents a SystemSharedMemoryRegisterResponse. */
    class SystemSharedMemoryRegisterResponse {

        /**
         * Constructs a new SystemSharedMemoryRegisterResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.SystemSharedMemoryRegisterResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new SystemSharedMemoryRegisterResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns SystemSharedMemoryRegisterResponse instance
         */
        static create(properties: inference.SystemSharedMemoryRegisterResponse.$Shape): inference.SystemSharedMemoryRegisterResponse & inference.SystemSharedMemoryRegisterResponse.$Shape;
        static create(properties?: inference.SystemSharedMemoryRegisterResponse.$Properties): inference.SystemSharedMemoryRegisterResponse;

        /**
         * Encodes the specified SystemSharedMemoryRegisterResponse message. Does not implicitly {@link inference.SystemSharedMemoryRegisterResponse.verify|verify} messages.
         * @param message SystemSharedMemoryRegisterResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.SystemSharedMemoryRegisterResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a SystemSharedMemoryRegisterResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.SystemSharedMemoryRegisterResponse & inference.SystemSharedMemoryRegisterResponse.$Shape} SystemSharedMemoryRegisterResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.SystemSharedMemoryRegisterResponse & inference.SystemSharedMemoryRegisterResponse.$Shape;

        /**
         * Creates a SystemSharedMemoryRegisterResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns SystemSharedMemoryRegisterResponse
         */
        static fromObject(object: { [k: string]: any }): inference.SystemSharedMemoryRegisterResponse;

        /**
         * Creates a plain object from a SystemSharedMemoryRegisterResponse message. Also converts values to other types if specified.
         * @param message SystemSharedMemoryRegisterResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.SystemSharedMemoryRegisterResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this SystemSharedMemoryRegisterResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace SystemSharedMemoryRegisterResponse {

        /** Properties of a SystemSharedMemoryRegisterResponse. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a SystemSharedMemoryRegisterResponse. */
        type $Shape = inference.SystemSharedMemoryRegisterResponse.$Properties;
    }

    /**
     * Properties of a SystemSharedMemoryUnregisterRequest.
     * @deprecated Use inference.SystemSharedMemoryUnregisterRequest.$Properties instead.
     */
    interface ISystemSharedMemoryUnregisterRequest extends inference.SystemSharedMemoryUnregisterRequest.$Properties {
    }

    /** Represents a SystemSharedMemoryUnregisterRequest. */
    class SystemSharedMemoryUnregisterRequest {

        /**
         * Constructs a new SystemSharedMemoryUnregisterRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.SystemSharedMemoryUnregisterRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** SystemSharedMemoryUnregisterRequest name. */
        name: string;

        /**
         * Creates a new SystemSharedMemoryUnregisterRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns SystemSharedMemoryUnregisterRequest instance
         */
        static create(properties: inference.SystemSharedMemoryUnregisterRequest.$Shape): inference.SystemSharedMemoryUnregisterRequest & inference.SystemSharedMemoryUnregisterRequest.$Shape;
        static create(properties?: inference.SystemSharedMemoryUnregisterRequest.$Properties): inference.SystemSharedMemoryUnregisterRequest;

        /**
         * Encodes the specified SystemSharedMemoryUnregisterRequest message. Does not implicitly {@link inference.SystemSharedMemoryUnregisterRequest.verify|verify} messages.
         * @param message SystemSharedMemoryUnregisterRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.SystemSharedMemoryUnregisterRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a SystemSharedMemoryUnregisterRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.SystemSharedMemoryUnregisterRequest & inference.SystemSharedMemoryUnregisterRequest.$Shape} SystemSharedMemoryUnregisterRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.SystemSharedMemoryUnregisterRequest & inference.SystemSharedMemoryUnregisterRequest.$Shape;

        /**
         * Creates a SystemSharedMemoryUnregisterRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns SystemSharedMemoryUnregisterRequest
         */
        static fromObject(object: { [k: string]: any }): inference.SystemSharedMemoryUnregisterRequest;

        /**
         * Creates a plain object from a SystemSharedMemoryUnregisterRequest message. Also converts values to other types if specified.
         * @param message SystemSharedMemoryUnregisterRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.SystemSharedMemoryUnregisterRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this SystemSharedMemoryUnregisterRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace SystemSharedMemoryUnregisterRequest {

        /** Properties of a SystemSharedMemoryUnregisterRequest. */
        interface $Properties {

            /** SystemSharedMemoryUnregisterRequest name */
            name?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a SystemSharedMemoryUnregisterRequest. */
        type $Shape = inference.SystemSharedMemoryUnregisterRequest.$Properties;
    }

    /**
     * Properties of a SystemSharedMemoryUnregisterResponse.
     * @deprecated Use inference.SystemSharedMemoryUnregisterResponse.$Properties instead.
     */
    interface ISystemSharedMemoryUnregisterResponse extends inference.SystemSharedMemoryUnregisterResponse.$Properties {
    }

    /** Represents a SystemSharedMemoryUnregisterResponse. */
    class SystemSharedMemoryUnregisterResponse {

        /**
         * Constructs a new SystemSharedMemoryUnregisterResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.SystemSharedMemoryUnregisterResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new SystemSharedMemoryUnregisterResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns SystemSharedMemoryUnregisterResponse instance
         */
        static create(properties: inference.SystemSharedMemoryUnregisterResponse.$Shape): inference.SystemSharedMemoryUnregisterResponse & inference.SystemSharedMemoryUnregisterResponse.$Shape;
        static create(properties?: inference.SystemSharedMemoryUnregisterResponse.$Properties): inference.SystemSharedMemoryUnregisterResponse;

        /**
         * Encodes the specified SystemSharedMemoryUnregisterResponse message. Does not implicitly {@link inference.SystemSharedMemoryUnregisterResponse.verify|verify} messages.
         * @param message SystemSharedMemoryUnregisterResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.SystemSharedMemoryUnregisterResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a SystemSharedMemoryUnregisterResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.SystemSharedMemoryUnregisterResponse & inference.SystemSharedMemoryUnregisterResponse.$Shape} SystemSharedMemoryUnregisterResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.SystemSharedMemoryUnregisterResponse & inference.SystemSharedMemoryUnregisterResponse.$Shape;

        /**
         * Creates a SystemSharedMemoryUnregisterResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns SystemSharedMemoryUnregisterResponse
         */
        static fromObject(object: { [k: string]: any }): inference.SystemSharedMemoryUnregisterResponse;

        /**
         * Creates a plain object from a SystemSharedMemoryUnregisterResponse message. Also converts values to other types if specified.
         * @param message SystemSharedMemoryUnregisterResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.SystemSharedMemoryUnregisterResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this SystemSharedMemoryUnregisterResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace SystemSharedMemoryUnregisterResponse {

        /** Properties of a SystemSharedMemoryUnregisterResponse. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a SystemSharedMemoryUnregisterResponse. */
        type $Shape = inference.SystemSharedMemoryUnregisterResponse.$Properties;
    }

    /**
     * Properties of a CudaSharedMemoryStatusRequest.
     * @deprecated Use inference.CudaSharedMemoryStatusRequest.$Properties instead.
     */
    interface ICudaSharedMemoryStatusRequest extends inference.CudaSharedMemoryStatusRequest.$Properties {
    }

    /** Represents a CudaSharedMemoryStatusRequest. */
    class CudaSharedMemoryStatusRequest {

        /**
         * Constructs a new CudaSharedMemoryStatusRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.CudaSharedMemoryStatusRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** CudaSharedMemoryStatusRequest name. */
        name: string;

        /**
         * Creates a new CudaSharedMemoryStatusRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns CudaSharedMemoryStatusRequest instance
         */
        static create(properties: inference.CudaSharedMemoryStatusRequest.$Shape): inference.CudaSharedMemoryStatusRequest & inference.CudaSharedMemoryStatusRequest.$Shape;
        static create(properties?: inference.CudaSharedMemoryStatusRequest.$Properties): inference.CudaSharedMemoryStatusRequest;

        /**
         * Encodes the specified CudaSharedMemoryStatusRequest message. Does not implicitly {@link inference.CudaSharedMemoryStatusRequest.verify|verify} messages.
         * @param message CudaSharedMemoryStatusRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.CudaSharedMemoryStatusRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a CudaSharedMemoryStatusRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.CudaSharedMemoryStatusRequest & inference.CudaSharedMemoryStatusRequest.$Shape} CudaSharedMemoryStatusRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.CudaSharedMemoryStatusRequest & inference.CudaSharedMemoryStatusRequest.$Shape;

        /**
         * Creates a CudaSharedMemoryStatusRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns CudaSharedMemoryStatusRequest
         */
        static fromObject(object: { [k: string]: any }): inference.CudaSharedMemoryStatusRequest;

        /**
         * Creates a plain object from a CudaSharedMemoryStatusRequest message. Also converts values to other types if specified.
         * @param message CudaSharedMemoryStatusRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.CudaSharedMemoryStatusRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this CudaSharedMemoryStatusRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace CudaSharedMemoryStatusRequest {

        /** Properties of a CudaSharedMemoryStatusRequest. */
        interface $Properties {

            /** CudaSharedMemoryStatusRequest name */
            name?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a CudaSharedMemoryStatusRequest. */
        type $Shape = inference.CudaSharedMemoryStatusRequest.$Properties;
    }

    /**
     * Properties of a CudaSharedMemoryStatusResponse.
     * @deprecated Use inference.CudaSharedMemoryStatusResponse.$Properties instead.
     */
    interface ICudaSharedMemoryStatusResponse extends inference.CudaSharedMemoryStatusResponse.$Properties {
    }

    /** Represents a CudaSharedMemoryStatusResponse. */
    class CudaSharedMemoryStatusResponse {

        /**
         * Constructs a new CudaSharedMemoryStatusResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.CudaSharedMemoryStatusResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** CudaSharedMemoryStatusResponse regions. */
        regions: { [k: string]: inference.CudaSharedMemoryStatusResponse.RegionStatus.$Properties };

        /**
         * Creates a new CudaSharedMemoryStatusResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns CudaSharedMemoryStatusResponse instance
         */
        static create(properties: inference.CudaSharedMemoryStatusResponse.$Shape): inference.CudaSharedMemoryStatusResponse & inference.CudaSharedMemoryStatusResponse.$Shape;
        static create(properties?: inference.CudaSharedMemoryStatusResponse.$Properties): inference.CudaSharedMemoryStatusResponse;

        /**
         * Encodes the specified CudaSharedMemoryStatusResponse message. Does not implicitly {@link inference.CudaSharedMemoryStatusResponse.verify|verify} messages.
         * @param message CudaSharedMemoryStatusResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.CudaSharedMemoryStatusResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a CudaSharedMemoryStatusResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.CudaSharedMemoryStatusResponse & inference.CudaSharedMemoryStatusResponse.$Shape} CudaSharedMemoryStatusResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.CudaSharedMemoryStatusResponse & inference.CudaSharedMemoryStatusResponse.$Shape;

        /**
         * Creates a CudaSharedMemoryStatusResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns CudaSharedMemoryStatusResponse
         */
        static fromObject(object: { [k: string]: any }): inference.CudaSharedMemoryStatusResponse;

        /**
         * Creates a plain object from a CudaSharedMemoryStatusResponse message. Also converts values to other types if specified.
         * @param message CudaSharedMemoryStatusResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.CudaSharedMemoryStatusResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this CudaSharedMemoryStatusResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace CudaSharedMemoryStatusResponse {

        /** Properties of a CudaSharedMemoryStatusResponse. */
        interface $Properties {

            /** CudaSharedMemoryStatusResponse regions */
            regions?: ({ [k: string]: inference.CudaSharedMemoryStatusResponse.RegionStatus.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a CudaSharedMemoryStatusResponse. */
        type $Shape = inference.CudaSharedMemoryStatusResponse.$Properties;

        /**
         * Properties of a RegionStatus.
         * @deprecated Use inference.CudaSharedMemoryStatusResponse.RegionStatus.$Properties instead.
         */
        interface IRegionStatus extends inference.CudaSharedMemoryStatusResponse.RegionStatus.$Properties {
        }

        /** Represents a RegionStatus. */
        class RegionStatus {

            /**
             * Constructs a new RegionStatus.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.CudaSharedMemoryStatusResponse.RegionStatus.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** RegionStatus name. */
            name: string;

            /** RegionStatus device_id. */
            device_id: (number|Long);

            /** RegionStatus byte_size. */
            byte_size: (number|Long);

            /**
             * Creates a new RegionStatus instance using the specified properties.
             * @param [properties] Properties to set
             * @returns RegionStatus instance
             */
            static create(properties: inference.CudaSharedMemoryStatusResponse.RegionStatus.$Shape): inference.CudaSharedMemoryStatusResponse.RegionStatus & inference.CudaSharedMemoryStatusResponse.RegionStatus.$Shape;
            static create(properties?: inference.CudaSharedMemoryStatusResponse.RegionStatus.$Properties): inference.CudaSharedMemoryStatusResponse.RegionStatus;

            /**
             * Encodes the specified RegionStatus message. Does not implicitly {@link inference.CudaSharedMemoryStatusResponse.RegionStatus.verify|verify} messages.
             * @param message RegionStatus message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.CudaSharedMemoryStatusResponse.RegionStatus.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a RegionStatus message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.CudaSharedMemoryStatusResponse.RegionStatus & inference.CudaSharedMemoryStatusResponse.RegionStatus.$Shape} RegionStatus
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.CudaSharedMemoryStatusResponse.RegionStatus & inference.CudaSharedMemoryStatusResponse.RegionStatus.$Shape;

            /**
             * Creates a RegionStatus message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns RegionStatus
             */
            static fromObject(object: { [k: string]: any }): inference.CudaSharedMemoryStatusResponse.RegionStatus;

            /**
             * Creates a plain object from a RegionStatus message. Also converts values to other types if specified.
             * @param message RegionStatus
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.CudaSharedMemoryStatusResponse.RegionStatus, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this RegionStatus to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace RegionStatus {

            /** Properties of a RegionStatus. */
            interface $Properties {

                /** RegionStatus name */
                name?: (string|null);

                /** RegionStatus device_id */
                device_id?: (number|Long|null);

                /** RegionStatus byte_size */
                byte_size?: (number|Long|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a RegionStatus. */
            type $Shape = inference.CudaSharedMemoryStatusResponse.RegionStatus.$Properties;
        }
    }

    /**
     * Properties of a CudaSharedMemoryRegisterRequest.
     * @deprecated Use inference.CudaSharedMemoryRegisterRequest.$Properties instead.
     */
    interface ICudaSharedMemoryRegisterRequest extends inference.CudaSharedMemoryRegisterRequest.$Properties {
    }

    /** Represents a CudaSharedMemoryRegisterRequest. */
    class CudaSharedMemoryRegisterRequest {

        /**
         * Constructs a new CudaSharedMemoryRegisterRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.CudaSharedMemoryRegisterRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** CudaSharedMemoryRegisterRequest name. */
        name: string;

        /** CudaSharedMemoryRegisterRequest raw_handle. */
        raw_handle: Uint8Array;

        /** CudaSharedMemoryRegisterRequest device_id. */
        device_id: (number|Long);

        /** CudaSharedMemoryRegisterRequest byte_size. */
        byte_size: (number|Long);

        /**
         * Creates a new CudaSharedMemoryRegisterRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns CudaSharedMemoryRegisterRequest instance
         */
        static create(properties: inference.CudaSharedMemoryRegisterRequest.$Shape): inference.CudaSharedMemoryRegisterRequest & inference.CudaSharedMemoryRegisterRequest.$Shape;
        static create(properties?: inference.CudaSharedMemoryRegisterRequest.$Properties): inference.CudaSharedMemoryRegisterRequest;

        /**
         * Encodes the specified CudaSharedMemoryRegisterRequest message. Does not implicitly {@link inference.CudaSharedMemoryRegisterRequest.verify|verify} messages.
         * @param message CudaSharedMemoryRegisterRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.CudaSharedMemoryRegisterRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a CudaSharedMemoryRegisterRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.CudaSharedMemoryRegisterRequest & inference.CudaSharedMemoryRegisterRequest.$Shape} CudaSharedMemoryRegisterRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.CudaSharedMemoryRegisterRequest & inference.CudaSharedMemoryRegisterRequest.$Shape;

        /**
         * Creates a CudaSharedMemoryRegisterRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns CudaSharedMemoryRegisterRequest
         */
        static fromObject(object: { [k: string]: any }): inference.CudaSharedMemoryRegisterRequest;

        /**
         * Creates a plain object from a CudaSharedMemoryRegisterRequest message. Also converts values to other types if specified.
         * @param message CudaSharedMemoryRegisterRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.CudaSharedMemoryRegisterRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this CudaSharedMemoryRegisterRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace CudaSharedMemoryRegisterRequest {

        /** Properties of a CudaSharedMemoryRegisterRequest. */
        interface $Properties {

            /** CudaSharedMemoryRegisterRequest name */
            name?: (string|null);

            /** CudaSharedMemoryRegisterRequest raw_handle */
            raw_handle?: (Uint8Array|null);

            /** CudaSharedMemoryRegisterRequest device_id */
            device_id?: (number|Long|null);

            /** CudaSharedMemoryRegisterRequest byte_size */
            byte_size?: (number|Long|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a CudaSharedMemoryRegisterRequest. */
        type $Shape = inference.CudaSharedMemoryRegisterRequest.$Properties;
    }

    /**
     * Properties of a CudaSharedMemoryRegisterResponse.
     * @deprecated Use inference.CudaSharedMemoryRegisterResponse.$Properties instead.
     */
    interface ICudaSharedMemoryRegisterResponse extends inference.CudaSharedMemoryRegisterResponse.$Properties {
    }

    /** Represents a CudaSharedMemoryRegisterResponse. */
    class CudaSharedMemoryRegisterResponse {

        /**
         * Constructs a new CudaSharedMemoryRegisterResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.CudaSharedMemoryRegisterResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new CudaSharedMemoryRegisterResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns CudaSharedMemoryRegisterResponse instance
         */
        static create(properties: inference.CudaSharedMemoryRegisterResponse.$Shape): inference.CudaSharedMemoryRegisterResponse & inference.CudaSharedMemoryRegisterResponse.$Shape;
        static create(properties?: inference.CudaSharedMemoryRegisterResponse.$Properties): inference.CudaSharedMemoryRegisterResponse;

        /**
         * Encodes the specified CudaSharedMemoryRegisterResponse message. Does not implicitly {@link inference.CudaSharedMemoryRegisterResponse.verify|verify} messages.
         * @param message CudaSharedMemoryRegisterResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.CudaSharedMemoryRegisterResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a CudaSharedMemoryRegisterResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.CudaSharedMemoryRegisterResponse & inference.CudaSharedMemoryRegisterResponse.$Shape} CudaSharedMemoryRegisterResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.CudaSharedMemoryRegisterResponse & inference.CudaSharedMemoryRegisterResponse.$Shape;

        /**
         * Creates a CudaSharedMemoryRegisterResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns CudaSharedMemoryRegisterResponse
         */
        static fromObject(object: { [k: string]: any }): inference.CudaSharedMemoryRegisterResponse;

        /**
         * Creates a plain object from a CudaSharedMemoryRegisterResponse message. Also converts values to other types if specified.
         * @param message CudaSharedMemoryRegisterResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.CudaSharedMemoryRegisterResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this CudaSharedMemoryRegisterResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace CudaSharedMemoryRegisterResponse {

        /** Properties of a CudaSharedMemoryRegisterResponse. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a CudaSharedMemoryRegisterResponse. */
        type $Shape = inference.CudaSharedMemoryRegisterResponse.$Properties;
    }

    /**
     * Properties of a CudaSharedMemoryUnregisterRequest.
     * @deprecated Use inference.CudaSharedMemoryUnregisterRequest.$Properties instead.
     */
    interface ICudaSharedMemoryUnregisterRequest extends inference.CudaSharedMemoryUnregisterRequest.$Properties {
    }

    /** Represents a CudaSharedMemoryUnregisterRequest. */
    class CudaSharedMemoryUnregisterRequest {

        /**
         * Constructs a new CudaSharedMemoryUnregisterRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.CudaSharedMemoryUnregisterRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** CudaSharedMemoryUnregisterRequest name. */
        name: string;

        /**
         * Creates a new CudaSharedMemoryUnregisterRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns CudaSharedMemoryUnregisterRequest instance
         */
        static create(properties: inference.CudaSharedMemoryUnregisterRequest.$Shape): inference.CudaSharedMemoryUnregisterRequest & inference.CudaSharedMemoryUnregisterRequest.$Shape;
        static create(properties?: inference.CudaSharedMemoryUnregisterRequest.$Properties): inference.CudaSharedMemoryUnregisterRequest;

        /**
         * Encodes the specified CudaSharedMemoryUnregisterRequest message. Does not implicitly {@link inference.CudaSharedMemoryUnregisterRequest.verify|verify} messages.
         * @param message CudaSharedMemoryUnregisterRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.CudaSharedMemoryUnregisterRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a CudaSharedMemoryUnregisterRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.CudaSharedMemoryUnregisterRequest & inference.CudaSharedMemoryUnregisterRequest.$Shape} CudaSharedMemoryUnregisterRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.CudaSharedMemoryUnregisterRequest & inference.CudaSharedMemoryUnregisterRequest.$Shape;

        /**
         * Creates a CudaSharedMemoryUnregisterRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns CudaSharedMemoryUnregisterRequest
         */
        static fromObject(object: { [k: string]: any }): inference.CudaSharedMemoryUnregisterRequest;

        /**
         * Creates a plain object from a CudaSharedMemoryUnregisterRequest message. Also converts values to other types if specified.
         * @param message CudaSharedMemoryUnregisterRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.CudaSharedMemoryUnregisterRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this CudaSharedMemoryUnregisterRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace CudaSharedMemoryUnregisterRequest {

        /** Properties of a CudaSharedMemoryUnregisterRequest. */
        interface $Properties {

            /** CudaSharedMemoryUnregisterRequest name */
            name?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a CudaSharedMemoryUnregisterRequest. */
        type $Shape = inference.CudaSharedMemoryUnregisterRequest.$Properties;
    }

    /**
     * Properties of a CudaSharedMemoryUnregisterResponse.
     * @deprecated Use inference.CudaSharedMemoryUnregisterResponse.$Properties instead.
     */
    interface ICudaSharedMemoryUnregisterResponse extends inference.CudaSharedMemoryUnregisterResponse.$Properties {
    }

    /** Represents a CudaSharedMemoryUnregisterResponse. */
    class CudaSharedMemoryUnregisterResponse {

        /**
         * Constructs a new CudaSharedMemoryUnregisterResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.CudaSharedMemoryUnregisterResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /**
         * Creates a new CudaSharedMemoryUnregisterResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns CudaSharedMemoryUnregisterResponse instance
         */
        static create(properties: inference.CudaSharedMemoryUnregisterResponse.$Shape): inference.CudaSharedMemoryUnregisterResponse & inference.CudaSharedMemoryUnregisterResponse.$Shape;
        static create(properties?: inference.CudaSharedMemoryUnregisterResponse.$Properties): inference.CudaSharedMemoryUnregisterResponse;

        /**
         * Encodes the specified CudaSharedMemoryUnregisterResponse message. Does not implicitly {@link inference.CudaSharedMemoryUnregisterResponse.verify|verify} messages.
         * @param message CudaSharedMemoryUnregisterResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.CudaSharedMemoryUnregisterResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a CudaSharedMemoryUnregisterResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.CudaSharedMemoryUnregisterResponse & inference.CudaSharedMemoryUnregisterResponse.$Shape} CudaSharedMemoryUnregisterResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.CudaSharedMemoryUnregisterResponse & inference.CudaSharedMemoryUnregisterResponse.$Shape;

        /**
         * Creates a CudaSharedMemoryUnregisterResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns CudaSharedMemoryUnregisterResponse
         */
        static fromObject(object: { [k: string]: any }): inference.CudaSharedMemoryUnregisterResponse;

        /**
         * Creates a plain object from a CudaSharedMemoryUnregisterResponse message. Also converts values to other types if specified.
         * @param message CudaSharedMemoryUnregisterResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.CudaSharedMemoryUnregisterResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this CudaSharedMemoryUnregisterResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace CudaSharedMemoryUnregisterResponse {

        /** Properties of a CudaSharedMemoryUnregisterResponse. */
        interface $Properties {

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a CudaSharedMemoryUnregisterResponse. */
        type $Shape = inference.CudaSharedMemoryUnregisterResponse.$Properties;
    }

    /**
     * Properties of a TraceSettingRequest.
     * @deprecated Use inference.TraceSettingRequest.$Properties instead.
     */
    interface ITraceSettingRequest extends inference.TraceSettingRequest.$Properties {
    }

    /** Represents a TraceSettingRequest. */
    class TraceSettingRequest {

        /**
         * Constructs a new TraceSettingRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.TraceSettingRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** TraceSettingRequest settings. */
        settings: { [k: string]: inference.TraceSettingRequest.SettingValue.$Properties };

        /** TraceSettingRequest model_name. */
        model_name: string;

        /**
         * Creates a new TraceSettingRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns TraceSettingRequest instance
         */
        static create(properties: inference.TraceSettingRequest.$Shape): inference.TraceSettingRequest & inference.TraceSettingRequest.$Shape;
        static create(properties?: inference.TraceSettingRequest.$Properties): inference.TraceSettingRequest;

        /**
         * Encodes the specified TraceSettingRequest message. Does not implicitly {@link inference.TraceSettingRequest.verify|verify} messages.
         * @param message TraceSettingRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.TraceSettingRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a TraceSettingRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.TraceSettingRequest & inference.TraceSettingRequest.$Shape} TraceSettingRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.TraceSettingRequest & inference.TraceSettingRequest.$Shape;

        /**
         * Creates a TraceSettingRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns TraceSettingRequest
         */
        static fromObject(object: { [k: string]: any }): inference.TraceSettingRequest;

        /**
         * Creates a plain object from a TraceSettingRequest message. Also converts values to other types if specified.
         * @param message TraceSettingRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.TraceSettingRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this TraceSettingRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace TraceSettingRequest {

        /** Properties of a TraceSettingRequest. */
        interface $Properties {

            /** TraceSettingRequest settings */
            settings?: ({ [k: string]: inference.TraceSettingRequest.SettingValue.$Properties }|null);

            /** TraceSettingRequest model_name */
            model_name?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a TraceSettingRequest. */
        type $Shape = inference.TraceSettingRequest.$Properties;

        /**
         * Properties of a SettingValue.
         * @deprecated Use inference.TraceSettingRequest.SettingValue.$Properties instead.
         */
        interface ISettingValue extends inference.TraceSettingRequest.SettingValue.$Properties {
        }

        /** Represents a SettingValue. */
        class SettingValue {

            /**
             * Constructs a new SettingValue.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.TraceSettingRequest.SettingValue.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** SettingValue value. */
            value: string[];

            /**
             * Creates a new SettingValue instance using the specified properties.
             * @param [properties] Properties to set
             * @returns SettingValue instance
             */
            static create(properties: inference.TraceSettingRequest.SettingValue.$Shape): inference.TraceSettingRequest.SettingValue & inference.TraceSettingRequest.SettingValue.$Shape;
            static create(properties?: inference.TraceSettingRequest.SettingValue.$Properties): inference.TraceSettingRequest.SettingValue;

            /**
             * Encodes the specified SettingValue message. Does not implicitly {@link inference.TraceSettingRequest.SettingValue.verify|verify} messages.
             * @param message SettingValue message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.TraceSettingRequest.SettingValue.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a SettingValue message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.TraceSettingRequest.SettingValue & inference.TraceSettingRequest.SettingValue.$Shape} SettingValue
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.TraceSettingRequest.SettingValue & inference.TraceSettingRequest.SettingValue.$Shape;

            /**
             * Creates a SettingValue message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns SettingValue
             */
            static fromObject(object: { [k: string]: any }): inference.TraceSettingRequest.SettingValue;

            /**
             * Creates a plain object from a SettingValue message. Also converts values to other types if specified.
             * @param message SettingValue
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.TraceSettingRequest.SettingValue, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this SettingValue to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace SettingValue {

            /** Properties of a SettingValue. */
            interface $Properties {

                /** SettingValue value */
                value?: (string[]|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a SettingValue. */
            type $Shape = inference.TraceSettingRequest.SettingValue.$Properties;
        }
    }

    /**
     * Properties of a TraceSettingResponse.
     * @deprecated Use inference.TraceSettingResponse.$Properties instead.
     */
    interface ITraceSettingResponse extends inference.TraceSettingResponse.$Properties {
    }

    /** Represents a TraceSettingResponse. */
    class TraceSettingResponse {

        /**
         * Constructs a new TraceSettingResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.TraceSettingResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** TraceSettingResponse settings. */
        settings: { [k: string]: inference.TraceSettingResponse.SettingValue.$Properties };

        /**
         * Creates a new TraceSettingResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns TraceSettingResponse instance
         */
        static create(properties: inference.TraceSettingResponse.$Shape): inference.TraceSettingResponse & inference.TraceSettingResponse.$Shape;
        static create(properties?: inference.TraceSettingResponse.$Properties): inference.TraceSettingResponse;

        /**
         * Encodes the specified TraceSettingResponse message. Does not implicitly {@link inference.TraceSettingResponse.verify|verify} messages.
         * @param message TraceSettingResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.TraceSettingResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a TraceSettingResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.TraceSettingResponse & inference.TraceSettingResponse.$Shape} TraceSettingResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.TraceSettingResponse & inference.TraceSettingResponse.$Shape;

        /**
         * Creates a TraceSettingResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns TraceSettingResponse
         */
        static fromObject(object: { [k: string]: any }): inference.TraceSettingResponse;

        /**
         * Creates a plain object from a TraceSettingResponse message. Also converts values to other types if specified.
         * @param message TraceSettingResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.TraceSettingResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this TraceSettingResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace TraceSettingResponse {

        /** Properties of a TraceSettingResponse. */
        interface $Properties {

            /** TraceSettingResponse settings */
            settings?: ({ [k: string]: inference.TraceSettingResponse.SettingValue.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a TraceSettingResponse. */
        type $Shape = inference.TraceSettingResponse.$Properties;

        /**
         * Properties of a SettingValue.
         * @deprecated Use inference.TraceSettingResponse.SettingValue.$Properties instead.
         */
        interface ISettingValue extends inference.TraceSettingResponse.SettingValue.$Properties {
        }

        /** Represents a SettingValue. */
        class SettingValue {

            /**
             * Constructs a new SettingValue.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.TraceSettingResponse.SettingValue.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** SettingValue value. */
            value: string[];

            /**
             * Creates a new SettingValue instance using the specified properties.
             * @param [properties] Properties to set
             * @returns SettingValue instance
             */
            static create(properties: inference.TraceSettingResponse.SettingValue.$Shape): inference.TraceSettingResponse.SettingValue & inference.TraceSettingResponse.SettingValue.$Shape;
            static create(properties?: inference.TraceSettingResponse.SettingValue.$Properties): inference.TraceSettingResponse.SettingValue;

            /**
             * Encodes the specified SettingValue message. Does not implicitly {@link inference.TraceSettingResponse.SettingValue.verify|verify} messages.
             * @param message SettingValue message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.TraceSettingResponse.SettingValue.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a SettingValue message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.TraceSettingResponse.SettingValue & inference.TraceSettingResponse.SettingValue.$Shape} SettingValue
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.TraceSettingResponse.SettingValue & inference.TraceSettingResponse.SettingValue.$Shape;

            /**
             * Creates a SettingValue message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns SettingValue
             */
            static fromObject(object: { [k: string]: any }): inference.TraceSettingResponse.SettingValue;

            /**
             * Creates a plain object from a SettingValue message. Also converts values to other types if specified.
             * @param message SettingValue
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.TraceSettingResponse.SettingValue, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this SettingValue to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace SettingValue {

            /** Properties of a SettingValue. */
            interface $Properties {

                /** SettingValue value */
                value?: (string[]|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a SettingValue. */
            type $Shape = inference.TraceSettingResponse.SettingValue.$Properties;
        }
    }

    /**
     * Properties of a LogSettingsRequest.
     * @deprecated Use inference.LogSettingsRequest.$Properties instead.
     */
    interface ILogSettingsRequest extends inference.LogSettingsRequest.$Properties {
    }

    /** Represents a LogSettingsRequest. */
    class LogSettingsRequest {

        /**
         * Constructs a new LogSettingsRequest.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.LogSettingsRequest.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** LogSettingsRequest settings. */
        settings: { [k: string]: inference.LogSettingsRequest.SettingValue.$Properties };

        /**
         * Creates a new LogSettingsRequest instance using the specified properties.
         * @param [properties] Properties to set
         * @returns LogSettingsRequest instance
         */
        static create(properties: inference.LogSettingsRequest.$Shape): inference.LogSettingsRequest & inference.LogSettingsRequest.$Shape;
        static create(properties?: inference.LogSettingsRequest.$Properties): inference.LogSettingsRequest;

        /**
         * Encodes the specified LogSettingsRequest message. Does not implicitly {@link inference.LogSettingsRequest.verify|verify} messages.
         * @param message LogSettingsRequest message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.LogSettingsRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a LogSettingsRequest message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.LogSettingsRequest & inference.LogSettingsRequest.$Shape} LogSettingsRequest
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.LogSettingsRequest & inference.LogSettingsRequest.$Shape;

        /**
         * Creates a LogSettingsRequest message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns LogSettingsRequest
         */
        static fromObject(object: { [k: string]: any }): inference.LogSettingsRequest;

        /**
         * Creates a plain object from a LogSettingsRequest message. Also converts values to other types if specified.
         * @param message LogSettingsRequest
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.LogSettingsRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this LogSettingsRequest to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace LogSettingsRequest {

        /** Properties of a LogSettingsRequest. */
        interface $Properties {

            /** LogSettingsRequest settings */
            settings?: ({ [k: string]: inference.LogSettingsRequest.SettingValue.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a LogSettingsRequest. */
        type $Shape = {
          settings?: { [k: string]: inference.LogSettingsRequest.SettingValue.$Shape }|null;
          $unknowns?: Uint8Array[];
        };

        /**
         * Properties of a SettingValue.
         * @deprecated Use inference.LogSettingsRequest.SettingValue.$Properties instead.
         */
        interface ISettingValue extends inference.LogSettingsRequest.SettingValue.$Properties {
        }

        /** Represents a SettingValue. */
        class SettingValue {

            /**
             * Constructs a new SettingValue.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.LogSettingsRequest.SettingValue.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** SettingValue bool_param. */
            bool_param?: (boolean|null);

            /** SettingValue uint32_param. */
            uint32_param?: (number|null);

            /** SettingValue string_param. */
            string_param?: (string|null);

            /** SettingValue parameter_choice. */
            parameter_choice?: ("bool_param"|"uint32_param"|"string_param");

            /**
             * Creates a new SettingValue instance using the specified properties.
             * @param [properties] Properties to set
             * @returns SettingValue instance
             */
            static create(properties: inference.LogSettingsRequest.SettingValue.$Shape): inference.LogSettingsRequest.SettingValue & inference.LogSettingsRequest.SettingValue.$Shape;
            static create(properties?: inference.LogSettingsRequest.SettingValue.$Properties): inference.LogSettingsRequest.SettingValue;

            /**
             * Encodes the specified SettingValue message. Does not implicitly {@link inference.LogSettingsRequest.SettingValue.verify|verify} messages.
             * @param message SettingValue message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.LogSettingsRequest.SettingValue.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a SettingValue message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.LogSettingsRequest.SettingValue & inference.LogSettingsRequest.SettingValue.$Shape} SettingValue
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.LogSettingsRequest.SettingValue & inference.LogSettingsRequest.SettingValue.$Shape;

            /**
             * Creates a SettingValue message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns SettingValue
             */
            static fromObject(object: { [k: string]: any }): inference.LogSettingsRequest.SettingValue;

            /**
             * Creates a plain object from a SettingValue message. Also converts values to other types if specified.
             * @param message SettingValue
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.LogSettingsRequest.SettingValue, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this SettingValue to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace SettingValue {

            /** Properties of a SettingValue. */
            interface $Properties {

                /** SettingValue bool_param */
                bool_param?: (boolean|null);

                /** SettingValue uint32_param */
                uint32_param?: (number|null);

                /** SettingValue string_param */
                string_param?: (string|null);

                /** SettingValue parameter_choice */
                parameter_choice?: ("bool_param"|"uint32_param"|"string_param");

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Narrowed shape of a SettingValue. */
            type $Shape = {
              bool_param?: boolean|null;
              uint32_param?: number|null;
              string_param?: string|null;
              $unknowns?: Uint8Array[];
            } & (
              ({ parameter_choice?: undefined; bool_param?: null; uint32_param?: null; string_param?: null }|{ parameter_choice?: "bool_param"; bool_param: boolean; uint32_param?: null; string_param?: null }|{ parameter_choice?: "uint32_param"; bool_param?: null; uint32_param: number; string_param?: null }|{ parameter_choice?: "string_param"; bool_param?: null; uint32_param?: null; string_param: string })
            );
        }
    }

    /**
     * Properties of a LogSettingsResponse.
     * @deprecated Use inference.LogSettingsResponse.$Properties instead.
     */
    interface ILogSettingsResponse extends inference.LogSettingsResponse.$Properties {
    }

    /** Represents a LogSettingsResponse. */
    class LogSettingsResponse {

        /**
         * Constructs a new LogSettingsResponse.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.LogSettingsResponse.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** LogSettingsResponse settings. */
        settings: { [k: string]: inference.LogSettingsResponse.SettingValue.$Properties };

        /**
         * Creates a new LogSettingsResponse instance using the specified properties.
         * @param [properties] Properties to set
         * @returns LogSettingsResponse instance
         */
        static create(properties: inference.LogSettingsResponse.$Shape): inference.LogSettingsResponse & inference.LogSettingsResponse.$Shape;
        static create(properties?: inference.LogSettingsResponse.$Properties): inference.LogSettingsResponse;

        /**
         * Encodes the specified LogSettingsResponse message. Does not implicitly {@link inference.LogSettingsResponse.verify|verify} messages.
         * @param message LogSettingsResponse message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.LogSettingsResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a LogSettingsResponse message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.LogSettingsResponse & inference.LogSettingsResponse.$Shape} LogSettingsResponse
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.LogSettingsResponse & inference.LogSettingsResponse.$Shape;

        /**
         * Creates a LogSettingsResponse message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns LogSettingsResponse
         */
        static fromObject(object: { [k: string]: any }): inference.LogSettingsResponse;

        /**
         * Creates a plain object from a LogSettingsResponse message. Also converts values to other types if specified.
         * @param message LogSettingsResponse
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.LogSettingsResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this LogSettingsResponse to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace LogSettingsResponse {

        /** Properties of a LogSettingsResponse. */
        interface $Properties {

            /** LogSettingsResponse settings */
            settings?: ({ [k: string]: inference.LogSettingsResponse.SettingValue.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a LogSettingsResponse. */
        type $Shape = {
          settings?: { [k: string]: inference.LogSettingsResponse.SettingValue.$Shape }|null;
          $unknowns?: Uint8Array[];
        };

        /**
         * Properties of a SettingValue.
         * @deprecated Use inference.LogSettingsResponse.SettingValue.$Properties instead.
         */
        interface ISettingValue extends inference.LogSettingsResponse.SettingValue.$Properties {
        }

        /** Represents a SettingValue. */
        class SettingValue {

            /**
             * Constructs a new SettingValue.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.LogSettingsResponse.SettingValue.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** SettingValue bool_param. */
            bool_param?: (boolean|null);

            /** SettingValue uint32_param. */
            uint32_param?: (number|null);

            /** SettingValue string_param. */
            string_param?: (string|null);

            /** SettingValue parameter_choice. */
            parameter_choice?: ("bool_param"|"uint32_param"|"string_param");

            /**
             * Creates a new SettingValue instance using the specified properties.
             * @param [properties] Properties to set
             * @returns SettingValue instance
             */
            static create(properties: inference.LogSettingsResponse.SettingValue.$Shape): inference.LogSettingsResponse.SettingValue & inference.LogSettingsResponse.SettingValue.$Shape;
            static create(properties?: inference.LogSettingsResponse.SettingValue.$Properties): inference.LogSettingsResponse.SettingValue;

            /**
             * Encodes the specified SettingValue message. Does not implicitly {@link inference.LogSettingsResponse.SettingValue.verify|verify} messages.
             * @param message SettingValue message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.LogSettingsResponse.SettingValue.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a SettingValue message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.LogSettingsResponse.SettingValue & inference.LogSettingsResponse.SettingValue.$Shape} SettingValue
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.LogSettingsResponse.SettingValue & inference.LogSettingsResponse.SettingValue.$Shape;

            /**
             * Creates a SettingValue message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns SettingValue
             */
            static fromObject(object: { [k: string]: any }): inference.LogSettingsResponse.SettingValue;

            /**
             * Creates a plain object from a SettingValue message. Also converts values to other types if specified.
             * @param message SettingValue
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.LogSettingsResponse.SettingValue, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this SettingValue to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace SettingValue {

            /** Properties of a SettingValue. */
            interface $Properties {

                /** SettingValue bool_param */
                bool_param?: (boolean|null);

                /** SettingValue uint32_param */
                uint32_param?: (number|null);

                /** SettingValue string_param */
                string_param?: (string|null);

                /** SettingValue parameter_choice */
                parameter_choice?: ("bool_param"|"uint32_param"|"string_param");

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Narrowed shape of a SettingValue. */
            type $Shape = {
              bool_param?: boolean|null;
              uint32_param?: number|null;
              string_param?: string|null;
              $unknowns?: Uint8Array[];
            } & (
              ({ parameter_choice?: undefined; bool_param?: null; uint32_param?: null; string_param?: null }|{ parameter_choice?: "bool_param"; bool_param: boolean; uint32_param?: null; string_param?: null }|{ parameter_choice?: "uint32_param"; bool_param?: null; uint32_param: number; string_param?: null }|{ parameter_choice?: "string_param"; bool_param?: null; uint32_param?: null; string_param: string })
            );
        }
    }

    /** DataType enum. */
    enum DataType {

        /** TYPE_INVALID value */
        TYPE_INVALID = 0,

        /** TYPE_BOOL value */
        TYPE_BOOL = 1,

        /** TYPE_UINT8 value */
        TYPE_UINT8 = 2,

        /** TYPE_UINT16 value */
        TYPE_UINT16 = 3,

        /** TYPE_UINT32 value */
        TYPE_UINT32 = 4,

        /** TYPE_UINT64 value */
        TYPE_UINT64 = 5,

        /** TYPE_INT8 value */
        TYPE_INT8 = 6,

        /** TYPE_INT16 value */
        TYPE_INT16 = 7,

        /** TYPE_INT32 value */
        TYPE_INT32 = 8,

        /** TYPE_INT64 value */
        TYPE_INT64 = 9,

        /** TYPE_FP16 value */
        TYPE_FP16 = 10,

        /** TYPE_FP32 value */
        TYPE_FP32 = 11,

        /** TYPE_FP64 value */
        TYPE_FP64 = 12,

        /** TYPE_STRING value */
        TYPE_STRING = 13,

        /** TYPE_BF16 value */
        TYPE_BF16 = 14
    }

    /**
     * Properties of a ModelRateLimiter.
     * @deprecated Use inference.ModelRateLimiter.$Properties instead.
     */
    interface IModelRateLimiter extends inference.ModelRateLimiter.$Properties {
    }

    /** Represents a ModelRateLimiter. */
    class ModelRateLimiter {

        /**
         * Constructs a new ModelRateLimiter.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelRateLimiter.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelRateLimiter resources. */
        resources: inference.ModelRateLimiter.Resource.$Properties[];

        /** ModelRateLimiter priority. */
        priority: number;

        /**
         * Creates a new ModelRateLimiter instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelRateLimiter instance
         */
        static create(properties: inference.ModelRateLimiter.$Shape): inference.ModelRateLimiter & inference.ModelRateLimiter.$Shape;
        static create(properties?: inference.ModelRateLimiter.$Properties): inference.ModelRateLimiter;

        /**
         * Encodes the specified ModelRateLimiter message. Does not implicitly {@link inference.ModelRateLimiter.verify|verify} messages.
         * @param message ModelRateLimiter message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelRateLimiter.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelRateLimiter message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelRateLimiter & inference.ModelRateLimiter.$Shape} ModelRateLimiter
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelRateLimiter & inference.ModelRateLimiter.$Shape;

        /**
         * Creates a ModelRateLimiter message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelRateLimiter
         */
        static fromObject(object: { [k: string]: any }): inference.ModelRateLimiter;

        /**
         * Creates a plain object from a ModelRateLimiter message. Also converts values to other types if specified.
         * @param message ModelRateLimiter
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelRateLimiter, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelRateLimiter to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelRateLimiter {

        /** Properties of a ModelRateLimiter. */
        interface $Properties {

            /** ModelRateLimiter resources */
            resources?: (inference.ModelRateLimiter.Resource.$Properties[]|null);

            /** ModelRateLimiter priority */
            priority?: (number|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelRateLimiter. */
        type $Shape = inference.ModelRateLimiter.$Properties;

        /**
         * Properties of a Resource.
         * @deprecated Use inference.ModelRateLimiter.Resource.$Properties instead.
         */
        interface IResource extends inference.ModelRateLimiter.Resource.$Properties {
        }

        /** Represents a Resource. */
        class Resource {

            /**
             * Constructs a new Resource.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelRateLimiter.Resource.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Resource name. */
            name: string;

            /** Resource global. */
            global: boolean;

            /** Resource count. */
            count: number;

            /**
             * Creates a new Resource instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Resource instance
             */
            static create(properties: inference.ModelRateLimiter.Resource.$Shape): inference.ModelRateLimiter.Resource & inference.ModelRateLimiter.Resource.$Shape;
            static create(properties?: inference.ModelRateLimiter.Resource.$Properties): inference.ModelRateLimiter.Resource;

            /**
             * Encodes the specified Resource message. Does not implicitly {@link inference.ModelRateLimiter.Resource.verify|verify} messages.
             * @param message Resource message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelRateLimiter.Resource.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a Resource message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelRateLimiter.Resource & inference.ModelRateLimiter.Resource.$Shape} Resource
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelRateLimiter.Resource & inference.ModelRateLimiter.Resource.$Shape;

            /**
             * Creates a Resource message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Resource
             */
            static fromObject(object: { [k: string]: any }): inference.ModelRateLimiter.Resource;

            /**
             * Creates a plain object from a Resource message. Also converts values to other types if specified.
             * @param message Resource
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelRateLimiter.Resource, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Resource to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Resource {

            /** Properties of a Resource. */
            interface $Properties {

                /** Resource name */
                name?: (string|null);

                /** Resource global */
                global?: (boolean|null);

                /** Resource count */
                count?: (number|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a Resource. */
            type $Shape = inference.ModelRateLimiter.Resource.$Properties;
        }
    }

    /**
     * Properties of a ModelInstanceGroup.
     * @deprecated Use inference.ModelInstanceGroup.$Properties instead.
     */
    interface IModelInstanceGroup extends inference.ModelInstanceGroup.$Properties {
    }

    /** Represents a ModelInstanceGroup. */
    class ModelInstanceGroup {

        /**
         * Constructs a new ModelInstanceGroup.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelInstanceGroup.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelInstanceGroup name. */
        name: string;

        /** ModelInstanceGroup kind. */
        kind: inference.ModelInstanceGroup.Kind;

        /** ModelInstanceGroup count. */
        count: number;

        /** ModelInstanceGroup rate_limiter. */
        rate_limiter?: (inference.ModelRateLimiter.$Properties|null);

        /** ModelInstanceGroup gpus. */
        gpus: number[];

        /** ModelInstanceGroup secondary_devices. */
        secondary_devices: inference.ModelInstanceGroup.SecondaryDevice.$Properties[];

        /** ModelInstanceGroup profile. */
        profile: string[];

        /** ModelInstanceGroup passive. */
        passive: boolean;

        /** ModelInstanceGroup host_policy. */
        host_policy: string;

        /**
         * Creates a new ModelInstanceGroup instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelInstanceGroup instance
         */
        static create(properties: inference.ModelInstanceGroup.$Shape): inference.ModelInstanceGroup & inference.ModelInstanceGroup.$Shape;
        static create(properties?: inference.ModelInstanceGroup.$Properties): inference.ModelInstanceGroup;

        /**
         * Encodes the specified ModelInstanceGroup message. Does not implicitly {@link inference.ModelInstanceGroup.verify|verify} messages.
         * @param message ModelInstanceGroup message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelInstanceGroup.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelInstanceGroup message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelInstanceGroup & inference.ModelInstanceGroup.$Shape} ModelInstanceGroup
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelInstanceGroup & inference.ModelInstanceGroup.$Shape;

        /**
         * Creates a ModelInstanceGroup message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelInstanceGroup
         */
        static fromObject(object: { [k: string]: any }): inference.ModelInstanceGroup;

        /**
         * Creates a plain object from a ModelInstanceGroup message. Also converts values to other types if specified.
         * @param message ModelInstanceGroup
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelInstanceGroup, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelInstanceGroup to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelInstanceGroup {

        /** Properties of a ModelInstanceGroup. */
        interface $Properties {

            /** ModelInstanceGroup name */
            name?: (string|null);

            /** ModelInstanceGroup kind */
            kind?: (inference.ModelInstanceGroup.Kind|null);

            /** ModelInstanceGroup count */
            count?: (number|null);

            /** ModelInstanceGroup rate_limiter */
            rate_limiter?: (inference.ModelRateLimiter.$Properties|null);

            /** ModelInstanceGroup gpus */
            gpus?: (number[]|null);

            /** ModelInstanceGroup secondary_devices */
            secondary_devices?: (inference.ModelInstanceGroup.SecondaryDevice.$Properties[]|null);

            /** ModelInstanceGroup profile */
            profile?: (string[]|null);

            /** ModelInstanceGroup passive */
            passive?: (boolean|null);

            /** ModelInstanceGroup host_policy */
            host_policy?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelInstanceGroup. */
        type $Shape = inference.ModelInstanceGroup.$Properties;

        /** Kind enum. */
        enum Kind {

            /** KIND_AUTO value */
            KIND_AUTO = 0,

            /** KIND_GPU value */
            KIND_GPU = 1,

            /** KIND_CPU value */
            KIND_CPU = 2,

            /** KIND_MODEL value */
            KIND_MODEL = 3
        }

        /**
         * Properties of a SecondaryDevice.
         * @deprecated Use inference.ModelInstanceGroup.SecondaryDevice.$Properties instead.
         */
        interface ISecondaryDevice extends inference.ModelInstanceGroup.SecondaryDevice.$Properties {
        }

        /** Represents a SecondaryDevice. */
        class SecondaryDevice {

            /**
             * Constructs a new SecondaryDevice.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelInstanceGroup.SecondaryDevice.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** SecondaryDevice kind. */
            kind: inference.ModelInstanceGroup.SecondaryDevice.SecondaryDeviceKind;

            /** SecondaryDevice device_id. */
            device_id: (number|Long);

            /**
             * Creates a new SecondaryDevice instance using the specified properties.
             * @param [properties] Properties to set
             * @returns SecondaryDevice instance
             */
            static create(properties: inference.ModelInstanceGroup.SecondaryDevice.$Shape): inference.ModelInstanceGroup.SecondaryDevice & inference.ModelInstanceGroup.SecondaryDevice.$Shape;
            static create(properties?: inference.ModelInstanceGroup.SecondaryDevice.$Properties): inference.ModelInstanceGroup.SecondaryDevice;

            /**
             * Encodes the specified SecondaryDevice message. Does not implicitly {@link inference.ModelInstanceGroup.SecondaryDevice.verify|verify} messages.
             * @param message SecondaryDevice message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelInstanceGroup.SecondaryDevice.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a SecondaryDevice message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelInstanceGroup.SecondaryDevice & inference.ModelInstanceGroup.SecondaryDevice.$Shape} SecondaryDevice
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelInstanceGroup.SecondaryDevice & inference.ModelInstanceGroup.SecondaryDevice.$Shape;

            /**
             * Creates a SecondaryDevice message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns SecondaryDevice
             */
            static fromObject(object: { [k: string]: any }): inference.ModelInstanceGroup.SecondaryDevice;

            /**
             * Creates a plain object from a SecondaryDevice message. Also converts values to other types if specified.
             * @param message SecondaryDevice
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelInstanceGroup.SecondaryDevice, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this SecondaryDevice to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace SecondaryDevice {

            /** Properties of a SecondaryDevice. */
            interface $Properties {

                /** SecondaryDevice kind */
                kind?: (inference.ModelInstanceGroup.SecondaryDevice.SecondaryDeviceKind|null);

                /** SecondaryDevice device_id */
                device_id?: (number|Long|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a SecondaryDevice. */
            type $Shape = inference.ModelInstanceGroup.SecondaryDevice.$Properties;

            /** SecondaryDeviceKind enum. */
            enum SecondaryDeviceKind {

                /** KIND_NVDLA value */
                KIND_NVDLA = 0
            }
        }
    }

    /**
     * Properties of a ModelTensorReshape.
     * @deprecated Use inference.ModelTensorReshape.$Properties instead.
     */
    interface IModelTensorReshape extends inference.ModelTensorReshape.$Properties {
    }

    /** Represents a ModelTensorReshape. */
    class ModelTensorReshape {

        /**
         * Constructs a new ModelTensorReshape.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelTensorReshape.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelTensorReshape shape. */
        shape: (number|Long)[];

        /**
         * Creates a new ModelTensorReshape instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelTensorReshape instance
         */
        static create(properties: inference.ModelTensorReshape.$Shape): inference.ModelTensorReshape & inference.ModelTensorReshape.$Shape;
        static create(properties?: inference.ModelTensorReshape.$Properties): inference.ModelTensorReshape;

        /**
         * Encodes the specified ModelTensorReshape message. Does not implicitly {@link inference.ModelTensorReshape.verify|verify} messages.
         * @param message ModelTensorReshape message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelTensorReshape.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelTensorReshape message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelTensorReshape & inference.ModelTensorReshape.$Shape} ModelTensorReshape
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelTensorReshape & inference.ModelTensorReshape.$Shape;

        /**
         * Creates a ModelTensorReshape message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelTensorReshape
         */
        static fromObject(object: { [k: string]: any }): inference.ModelTensorReshape;

        /**
         * Creates a plain object from a ModelTensorReshape message. Also converts values to other types if specified.
         * @param message ModelTensorReshape
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelTensorReshape, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelTensorReshape to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelTensorReshape {

        /** Properties of a ModelTensorReshape. */
        interface $Properties {

            /** ModelTensorReshape shape */
            shape?: ((number|Long)[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelTensorReshape. */
        type $Shape = inference.ModelTensorReshape.$Properties;
    }

    /**
     * Properties of a ModelInput.
     * @deprecated Use inference.ModelInput.$Properties instead.
     */
    interface IModelInput extends inference.ModelInput.$Properties {
    }

    /** Represents a ModelInput. */
    class ModelInput {

        /**
         * Constructs a new ModelInput.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelInput.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelInput name. */
        name: string;

        /** ModelInput data_type. */
        data_type: inference.DataType;

        /** ModelInput format. */
        format: inference.ModelInput.Format;

        /** ModelInput dims. */
        dims: (number|Long)[];

        /** ModelInput reshape. */
        reshape?: (inference.ModelTensorReshape.$Properties|null);

        /** ModelInput is_shape_tensor. */
        is_shape_tensor: boolean;

        /** ModelInput allow_ragged_batch. */
        allow_ragged_batch: boolean;

        /** ModelInput optional. */
        optional: boolean;

        /** ModelInput is_non_linear_format_io. */
        is_non_linear_format_io: boolean;

        /**
         * Creates a new ModelInput instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelInput instance
         */
        static create(properties: inference.ModelInput.$Shape): inference.ModelInput & inference.ModelInput.$Shape;
        static create(properties?: inference.ModelInput.$Properties): inference.ModelInput;

        /**
         * Encodes the specified ModelInput message. Does not implicitly {@link inference.ModelInput.verify|verify} messages.
         * @param message ModelInput message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelInput.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelInput message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelInput & inference.ModelInput.$Shape} ModelInput
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelInput & inference.ModelInput.$Shape;

        /**
         * Creates a ModelInput message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelInput
         */
        static fromObject(object: { [k: string]: any }): inference.ModelInput;

        /**
         * Creates a plain object from a ModelInput message. Also converts values to other types if specified.
         * @param message ModelInput
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelInput, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelInput to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelInput {

        /** Properties of a ModelInput. */
        interface $Properties {

            /** ModelInput name */
            name?: (string|null);

            /** ModelInput data_type */
            data_type?: (inference.DataType|null);

            /** ModelInput format */
            format?: (inference.ModelInput.Format|null);

            /** ModelInput dims */
            dims?: ((number|Long)[]|null);

            /** ModelInput reshape */
            reshape?: (inference.ModelTensorReshape.$Properties|null);

            /** ModelInput is_shape_tensor */
            is_shape_tensor?: (boolean|null);

            /** ModelInput allow_ragged_batch */
            allow_ragged_batch?: (boolean|null);

            /** ModelInput optional */
            optional?: (boolean|null);

            /** ModelInput is_non_linear_format_io */
            is_non_linear_format_io?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelInput. */
        type $Shape = inference.ModelInput.$Properties;

        /** Format enum. */
        enum Format {

            /** FORMAT_NONE value */
            FORMAT_NONE = 0,

            /** FORMAT_NHWC value */
            FORMAT_NHWC = 1,

            /** FORMAT_NCHW value */
            FORMAT_NCHW = 2
        }
    }

    /**
     * Properties of a ModelOutput.
     * @deprecated Use inference.ModelOutput.$Properties instead.
     */
    interface IModelOutput extends inference.ModelOutput.$Properties {
    }

    /** Represents a ModelOutput. */
    class ModelOutput {

        /**
         * Constructs a new ModelOutput.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelOutput.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelOutput name. */
        name: string;

        /** ModelOutput data_type. */
        data_type: inference.DataType;

        /** ModelOutput dims. */
        dims: (number|Long)[];

        /** ModelOutput reshape. */
        reshape?: (inference.ModelTensorReshape.$Properties|null);

        /** ModelOutput label_filename. */
        label_filename: string;

        /** ModelOutput is_shape_tensor. */
        is_shape_tensor: boolean;

        /** ModelOutput is_non_linear_format_io. */
        is_non_linear_format_io: boolean;

        /**
         * Creates a new ModelOutput instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelOutput instance
         */
        static create(properties: inference.ModelOutput.$Shape): inference.ModelOutput & inference.ModelOutput.$Shape;
        static create(properties?: inference.ModelOutput.$Properties): inference.ModelOutput;

        /**
         * Encodes the specified ModelOutput message. Does not implicitly {@link inference.ModelOutput.verify|verify} messages.
         * @param message ModelOutput message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelOutput.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelOutput message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelOutput & inference.ModelOutput.$Shape} ModelOutput
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOutput & inference.ModelOutput.$Shape;

        /**
         * Creates a ModelOutput message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelOutput
         */
        static fromObject(object: { [k: string]: any }): inference.ModelOutput;

        /**
         * Creates a plain object from a ModelOutput message. Also converts values to other types if specified.
         * @param message ModelOutput
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelOutput, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelOutput to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelOutput {

        /** Properties of a ModelOutput. */
        interface $Properties {

            /** ModelOutput name */
            name?: (string|null);

            /** ModelOutput data_type */
            data_type?: (inference.DataType|null);

            /** ModelOutput dims */
            dims?: ((number|Long)[]|null);

            /** ModelOutput reshape */
            reshape?: (inference.ModelTensorReshape.$Properties|null);

            /** ModelOutput label_filename */
            label_filename?: (string|null);

            /** ModelOutput is_shape_tensor */
            is_shape_tensor?: (boolean|null);

            /** ModelOutput is_non_linear_format_io */
            is_non_linear_format_io?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelOutput. */
        type $Shape = inference.ModelOutput.$Properties;
    }

    /**
     * Properties of a BatchInput.
     * @deprecated Use inference.BatchInput.$Properties instead.
     */
    interface IBatchInput extends inference.BatchInput.$Properties {
    }

    /** Represents a BatchInput. */
    class BatchInput {

        /**
         * Constructs a new BatchInput.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.BatchInput.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** BatchInput kind. */
        kind: inference.BatchInput.Kind;

        /** BatchInput target_name. */
        target_name: string[];

        /** BatchInput data_type. */
        data_type: inference.DataType;

        /** BatchInput source_input. */
        source_input: string[];

        /**
         * Creates a new BatchInput instance using the specified properties.
         * @param [properties] Properties to set
         * @returns BatchInput instance
         */
        static create(properties: inference.BatchInput.$Shape): inference.BatchInput & inference.BatchInput.$Shape;
        static create(properties?: inference.BatchInput.$Properties): inference.BatchInput;

        /**
         * Encodes the specified BatchInput message. Does not implicitly {@link inference.BatchInput.verify|verify} messages.
         * @param message BatchInput message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.BatchInput.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a BatchInput message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.BatchInput & inference.BatchInput.$Shape} BatchInput
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.BatchInput & inference.BatchInput.$Shape;

        /**
         * Creates a BatchInput message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns BatchInput
         */
        static fromObject(object: { [k: string]: any }): inference.BatchInput;

        /**
         * Creates a plain object from a BatchInput message. Also converts values to other types if specified.
         * @param message BatchInput
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.BatchInput, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this BatchInput to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace BatchInput {

        /** Properties of a BatchInput. */
        interface $Properties {

            /** BatchInput kind */
            kind?: (inference.BatchInput.Kind|null);

            /** BatchInput target_name */
            target_name?: (string[]|null);

            /** BatchInput data_type */
            data_type?: (inference.DataType|null);

            /** BatchInput source_input */
            source_input?: (string[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a BatchInput. */
        type $Shape = inference.BatchInput.$Properties;

        /** Kind enum. */
        enum Kind {

            /** BATCH_ELEMENT_COUNT value */
            BATCH_ELEMENT_COUNT = 0,

            /** BATCH_ACCUMULATED_ELEMENT_COUNT value */
            BATCH_ACCUMULATED_ELEMENT_COUNT = 1,

            /** BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO value */
            BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO = 2,

            /** BATCH_MAX_ELEMENT_COUNT_AS_SHAPE value */
            BATCH_MAX_ELEMENT_COUNT_AS_SHAPE = 3,

            /** BATCH_ITEM_SHAPE value */
            BATCH_ITEM_SHAPE = 4,

            /** BATCH_ITEM_SHAPE_FLATTEN value */
            BATCH_ITEM_SHAPE_FLATTEN = 5
        }
    }

    /**
     * Properties of a BatchOutput.
     * @deprecated Use inference.BatchOutput.$Properties instead.
     */
    interface IBatchOutput extends inference.BatchOutput.$Properties {
    }

    /** Represents a BatchOutput. */
    class BatchOutput {

        /**
         * Constructs a new BatchOutput.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.BatchOutput.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** BatchOutput target_name. */
        target_name: string[];

        /** BatchOutput kind. */
        kind: inference.BatchOutput.Kind;

        /** BatchOutput source_input. */
        source_input: string[];

        /**
         * Creates a new BatchOutput instance using the specified properties.
         * @param [properties] Properties to set
         * @returns BatchOutput instance
         */
        static create(properties: inference.BatchOutput.$Shape): inference.BatchOutput & inference.BatchOutput.$Shape;
        static create(properties?: inference.BatchOutput.$Properties): inference.BatchOutput;

        /**
         * Encodes the specified BatchOutput message. Does not implicitly {@link inference.BatchOutput.verify|verify} messages.
         * @param message BatchOutput message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.BatchOutput.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a BatchOutput message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.BatchOutput & inference.BatchOutput.$Shape} BatchOutput
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.BatchOutput & inference.BatchOutput.$Shape;

        /**
         * Creates a BatchOutput message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns BatchOutput
         */
        static fromObject(object: { [k: string]: any }): inference.BatchOutput;

        /**
         * Creates a plain object from a BatchOutput message. Also converts values to other types if specified.
         * @param message BatchOutput
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.BatchOutput, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this BatchOutput to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace BatchOutput {

        /** Properties of a BatchOutput. */
        interface $Properties {

            /** BatchOutput target_name */
            target_name?: (string[]|null);

            /** BatchOutput kind */
            kind?: (inference.BatchOutput.Kind|null);

            /** BatchOutput source_input */
            source_input?: (string[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a BatchOutput. */
        type $Shape = inference.BatchOutput.$Properties;

        /** Kind enum. */
        enum Kind {

            /** BATCH_SCATTER_WITH_INPUT_SHAPE value */
            BATCH_SCATTER_WITH_INPUT_SHAPE = 0
        }
    }

    /**
     * Properties of a ModelVersionPolicy.
     * @deprecated Use inference.ModelVersionPolicy.$Properties instead.
     */
    interface IModelVersionPolicy extends inference.ModelVersionPolicy.$Properties {
    }

    /** Represents a ModelVersionPolicy. */
    class ModelVersionPolicy {

        /**
         * Constructs a new ModelVersionPolicy.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelVersionPolicy.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelVersionPolicy latest. */
        latest?: (inference.ModelVersionPolicy.Latest.$Properties|null);

        /** ModelVersionPolicy all. */
        all?: (inference.ModelVersionPolicy.All.$Properties|null);

        /** ModelVersionPolicy specific. */
        specific?: (inference.ModelVersionPolicy.Specific.$Properties|null);

        /** ModelVersionPolicy policy_choice. */
        policy_choice?: ("latest"|"all"|"specific");

        /**
         * Creates a new ModelVersionPolicy instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelVersionPolicy instance
         */
        static create(properties: inference.ModelVersionPolicy.$Shape): inference.ModelVersionPolicy & inference.ModelVersionPolicy.$Shape;
        static create(properties?: inference.ModelVersionPolicy.$Properties): inference.ModelVersionPolicy;

        /**
         * Encodes the specified ModelVersionPolicy message. Does not implicitly {@link inference.ModelVersionPolicy.verify|verify} messages.
         * @param message ModelVersionPolicy message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelVersionPolicy.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelVersionPolicy message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelVersionPolicy & inference.ModelVersionPolicy.$Shape} ModelVersionPolicy
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelVersionPolicy & inference.ModelVersionPolicy.$Shape;

        /**
         * Creates a ModelVersionPolicy message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelVersionPolicy
         */
        static fromObject(object: { [k: string]: any }): inference.ModelVersionPolicy;

        /**
         * Creates a plain object from a ModelVersionPolicy message. Also converts values to other types if specified.
         * @param message ModelVersionPolicy
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelVersionPolicy, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelVersionPolicy to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelVersionPolicy {

        /** Properties of a ModelVersionPolicy. */
        interface $Properties {

            /** ModelVersionPolicy latest */
            latest?: (inference.ModelVersionPolicy.Latest.$Properties|null);

            /** ModelVersionPolicy all */
            all?: (inference.ModelVersionPolicy.All.$Properties|null);

            /** ModelVersionPolicy specific */
            specific?: (inference.ModelVersionPolicy.Specific.$Properties|null);

            /** ModelVersionPolicy policy_choice */
            policy_choice?: ("latest"|"all"|"specific");

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Narrowed shape of a ModelVersionPolicy. */
        type $Shape = {
          latest?: inference.ModelVersionPolicy.Latest.$Shape|null;
          all?: inference.ModelVersionPolicy.All.$Shape|null;
          specific?: inference.ModelVersionPolicy.Specific.$Shape|null;
          $unknowns?: Uint8Array[];
        } & (
          ({ policy_choice?: undefined; latest?: null; all?: null; specific?: null }|{ policy_choice?: "latest"; latest: inference.ModelVersionPolicy.Latest.$Shape; all?: null; specific?: null }|{ policy_choice?: "all"; latest?: null; all: inference.ModelVersionPolicy.All.$Shape; specific?: null }|{ policy_choice?: "specific"; latest?: null; all?: null; specific: inference.ModelVersionPolicy.Specific.$Shape })
        );

        /**
         * Properties of a Latest.
         * @deprecated Use inference.ModelVersionPolicy.Latest.$Properties instead.
         */
        interface ILatest extends inference.ModelVersionPolicy.Latest.$Properties {
        }

        /** Represents a Latest. */
        class Latest {

            /**
             * Constructs a new Latest.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelVersionPolicy.Latest.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Latest num_versions. */
            num_versions: number;

            /**
             * Creates a new Latest instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Latest instance
             */
            static create(properties: inference.ModelVersionPolicy.Latest.$Shape): inference.ModelVersionPolicy.Latest & inference.ModelVersionPolicy.Latest.$Shape;
            static create(properties?: inference.ModelVersionPolicy.Latest.$Properties): inference.ModelVersionPolicy.Latest;

            /**
             * Encodes the specified Latest message. Does not implicitly {@link inference.ModelVersionPolicy.Latest.verify|verify} messages.
             * @param message Latest message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelVersionPolicy.Latest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a Latest message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelVersionPolicy.Latest & inference.ModelVersionPolicy.Latest.$Shape} Latest
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelVersionPolicy.Latest & inference.ModelVersionPolicy.Latest.$Shape;

            /**
             * Creates a Latest message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Latest
             */
            static fromObject(object: { [k: string]: any }): inference.ModelVersionPolicy.Latest;

            /**
             * Creates a plain object from a Latest message. Also converts values to other types if specified.
             * @param message Latest
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelVersionPolicy.Latest, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Latest to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Latest {

            /** Properties of a Latest. */
            interface $Properties {

                /** Latest num_versions */
                num_versions?: (number|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a Latest. */
            type $Shape = inference.ModelVersionPolicy.Latest.$Properties;
        }

        /**
         * Properties of an All.
         * @deprecated Use inference.ModelVersionPolicy.All.$Properties instead.
         */
        interface IAll extends inference.ModelVersionPolicy.All.$Properties {
        }

        /** Represents an All. */
        class All {

            /**
             * Constructs a new All.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelVersionPolicy.All.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /**
             * Creates a new All instance using the specified properties.
             * @param [properties] Properties to set
             * @returns All instance
             */
            static create(properties: inference.ModelVersionPolicy.All.$Shape): inference.ModelVersionPolicy.All & inference.ModelVersionPolicy.All.$Shape;
            static create(properties?: inference.ModelVersionPolicy.All.$Properties): inference.ModelVersionPolicy.All;

            /**
             * Encodes the specified All message. Does not implicitly {@link inference.ModelVersionPolicy.All.verify|verify} messages.
             * @param message All message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelVersionPolicy.All.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes an All message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelVersionPolicy.All & inference.ModelVersionPolicy.All.$Shape} All
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelVersionPolicy.All & inference.ModelVersionPolicy.All.$Shape;

            /**
             * Creates an All message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns All
             */
            static fromObject(object: { [k: string]: any }): inference.ModelVersionPolicy.All;

            /**
             * Creates a plain object from an All message. Also converts values to other types if specified.
             * @param message All
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelVersionPolicy.All, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this All to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace All {

            /** Properties of an All. */
            interface $Properties {

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of an All. */
            type $Shape = inference.ModelVersionPolicy.All.$Properties;
        }

        /**
         * Properties of a Specific.
         * @deprecated Use inference.ModelVersionPolicy.Specific.$Properties instead.
         */
        interface ISpecific extends inference.ModelVersionPolicy.Specific.$Properties {
        }

        /** Represents a Specific. */
        class Specific {

            /**
             * Constructs a new Specific.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelVersionPolicy.Specific.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Specific versions. */
            versions: (number|Long)[];

            /**
             * Creates a new Specific instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Specific instance
             */
            static create(properties: inference.ModelVersionPolicy.Specific.$Shape): inference.ModelVersionPolicy.Specific & inference.ModelVersionPolicy.Specific.$Shape;
            static create(properties?: inference.ModelVersionPolicy.Specific.$Properties): inference.ModelVersionPolicy.Specific;

            /**
             * Encodes the specified Specific message. Does not implicitly {@link inference.ModelVersionPolicy.Specific.verify|verify} messages.
             * @param message Specific message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelVersionPolicy.Specific.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a Specific message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelVersionPolicy.Specific & inference.ModelVersionPolicy.Specific.$Shape} Specific
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelVersionPolicy.Specific & inference.ModelVersionPolicy.Specific.$Shape;

            /**
             * Creates a Specific message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Specific
             */
            static fromObject(object: { [k: string]: any }): inference.ModelVersionPolicy.Specific;

            /**
             * Creates a plain object from a Specific message. Also converts values to other types if specified.
             * @param message Specific
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelVersionPolicy.Specific, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Specific to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Specific {

            /** Properties of a Specific. */
            interface $Properties {

                /** Specific versions */
                versions?: ((number|Long)[]|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a Specific. */
            type $Shape = inference.ModelVersionPolicy.Specific.$Properties;
        }
    }

    /**
     * Properties of a ModelOptimizationPolicy.
     * @deprecated Use inference.ModelOptimizationPolicy.$Properties instead.
     */
    interface IModelOptimizationPolicy extends inference.ModelOptimizationPolicy.$Properties {
    }

    /** Represents a ModelOptimizationPolicy. */
    class ModelOptimizationPolicy {

        /**
         * Constructs a new ModelOptimizationPolicy.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelOptimizationPolicy.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelOptimizationPolicy graph. */
        graph?: (inference.ModelOptimizationPolicy.Graph.$Properties|null);

        /** ModelOptimizationPolicy priority. */
        priority: inference.ModelOptimizationPolicy.ModelPriority;

        /** ModelOptimizationPolicy cuda. */
        cuda?: (inference.ModelOptimizationPolicy.Cuda.$Properties|null);

        /** ModelOptimizationPolicy execution_accelerators. */
        execution_accelerators?: (inference.ModelOptimizationPolicy.ExecutionAccelerators.$Properties|null);

        /** ModelOptimizationPolicy input_pinned_memory. */
        input_pinned_memory?: (inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties|null);

        /** ModelOptimizationPolicy output_pinned_memory. */
        output_pinned_memory?: (inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties|null);

        /** ModelOptimizationPolicy gather_kernel_buffer_threshold. */
        gather_kernel_buffer_threshold: number;

        /** ModelOptimizationPolicy eager_batching. */
        eager_batching: boolean;

        /**
         * Creates a new ModelOptimizationPolicy instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelOptimizationPolicy instance
         */
        static create(properties: inference.ModelOptimizationPolicy.$Shape): inference.ModelOptimizationPolicy & inference.ModelOptimizationPolicy.$Shape;
        static create(properties?: inference.ModelOptimizationPolicy.$Properties): inference.ModelOptimizationPolicy;

        /**
         * Encodes the specified ModelOptimizationPolicy message. Does not implicitly {@link inference.ModelOptimizationPolicy.verify|verify} messages.
         * @param message ModelOptimizationPolicy message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelOptimizationPolicy.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelOptimizationPolicy message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelOptimizationPolicy & inference.ModelOptimizationPolicy.$Shape} ModelOptimizationPolicy
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy & inference.ModelOptimizationPolicy.$Shape;

        /**
         * Creates a ModelOptimizationPolicy message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelOptimizationPolicy
         */
        static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy;

        /**
         * Creates a plain object from a ModelOptimizationPolicy message. Also converts values to other types if specified.
         * @param message ModelOptimizationPolicy
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelOptimizationPolicy, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelOptimizationPolicy to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelOptimizationPolicy {

        /** Properties of a ModelOptimizationPolicy. */
        interface $Properties {

            /** ModelOptimizationPolicy graph */
            graph?: (inference.ModelOptimizationPolicy.Graph.$Properties|null);

            /** ModelOptimizationPolicy priority */
            priority?: (inference.ModelOptimizationPolicy.ModelPriority|null);

            /** ModelOptimizationPolicy cuda */
            cuda?: (inference.ModelOptimizationPolicy.Cuda.$Properties|null);

            /** ModelOptimizationPolicy execution_accelerators */
            execution_accelerators?: (inference.ModelOptimizationPolicy.ExecutionAccelerators.$Properties|null);

            /** ModelOptimizationPolicy input_pinned_memory */
            input_pinned_memory?: (inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties|null);

            /** ModelOptimizationPolicy output_pinned_memory */
            output_pinned_memory?: (inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties|null);

            /** ModelOptimizationPolicy gather_kernel_buffer_threshold */
            gather_kernel_buffer_threshold?: (number|null);

            /** ModelOptimizationPolicy eager_batching */
            eager_batching?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelOptimizationPolicy. */
        type $Shape = inference.ModelOptimizationPolicy.$Properties;

        /**
         * Properties of a Graph.
         * @deprecated Use inference.ModelOptimizationPolicy.Graph.$Properties instead.
         */
        interface IGraph extends inference.ModelOptimizationPolicy.Graph.$Properties {
        }

        /** Represents a Graph. */
        class Graph {

            /**
             * Constructs a new Graph.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelOptimizationPolicy.Graph.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Graph level. */
            level: number;

            /**
             * Creates a new Graph instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Graph instance
             */
            static create(properties: inference.ModelOptimizationPolicy.Graph.$Shape): inference.ModelOptimizationPolicy.Graph & inference.ModelOptimizationPolicy.Graph.$Shape;
            static create(properties?: inference.ModelOptimizationPolicy.Graph.$Properties): inference.ModelOptimizationPolicy.Graph;

            /**
             * Encodes the specified Graph message. Does not implicitly {@link inference.ModelOptimizationPolicy.Graph.verify|verify} messages.
             * @param message Graph message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelOptimizationPolicy.Graph.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a Graph message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelOptimizationPolicy.Graph & inference.ModelOptimizationPolicy.Graph.$Shape} Graph
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy.Graph & inference.ModelOptimizationPolicy.Graph.$Shape;

            /**
             * Creates a Graph message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Graph
             */
            static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy.Graph;

            /**
             * Creates a plain object from a Graph message. Also converts values to other types if specified.
             * @param message Graph
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelOptimizationPolicy.Graph, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Graph to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Graph {

            /** Properties of a Graph. */
            interface $Properties {

                /** Graph level */
                level?: (number|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a Graph. */
            type $Shape = inference.ModelOptimizationPolicy.Graph.$Properties;
        }

        /** ModelPriority enum. */
        enum ModelPriority {

            /** PRIORITY_DEFAULT value */
            PRIORITY_DEFAULT = 0,

            /** PRIORITY_MAX value */
            PRIORITY_MAX = 1,

            /** PRIORITY_MIN value */
            PRIORITY_MIN = 2
        }

        /**
         * Properties of a Cuda.
         * @deprecated Use inference.ModelOptimizationPolicy.Cuda.$Properties instead.
         */
        interface ICuda extends inference.ModelOptimizationPolicy.Cuda.$Properties {
        }

        /** Represents a Cuda. */
        class Cuda {

            /**
             * Constructs a new Cuda.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelOptimizationPolicy.Cuda.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Cuda graphs. */
            graphs: boolean;

            /** Cuda busy_wait_events. */
            busy_wait_events: boolean;

            /** Cuda graph_spec. */
            graph_spec: inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Properties[];

            /** Cuda output_copy_stream. */
            output_copy_stream: boolean;

            /**
             * Creates a new Cuda instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Cuda instance
             */
            static create(properties: inference.ModelOptimizationPolicy.Cuda.$Shape): inference.ModelOptimizationPolicy.Cuda & inference.ModelOptimizationPolicy.Cuda.$Shape;
            static create(properties?: inference.ModelOptimizationPolicy.Cuda.$Properties): inference.ModelOptimizationPolicy.Cuda;

            /**
             * Encodes the specified Cuda message. Does not implicitly {@link inference.ModelOptimizationPolicy.Cuda.verify|verify} messages.
             * @param message Cuda message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelOptimizationPolicy.Cuda.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a Cuda message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelOptimizationPolicy.Cuda & inference.ModelOptimizationPolicy.Cuda.$Shape} Cuda
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy.Cuda & inference.ModelOptimizationPolicy.Cuda.$Shape;

            /**
             * Creates a Cuda message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Cuda
             */
            static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy.Cuda;

            /**
             * Creates a plain object from a Cuda message. Also converts values to other types if specified.
             * @param message Cuda
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelOptimizationPolicy.Cuda, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Cuda to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Cuda {

            /** Properties of a Cuda. */
            interface $Properties {

                /** Cuda graphs */
                graphs?: (boolean|null);

                /** Cuda busy_wait_events */
                busy_wait_events?: (boolean|null);

                /** Cuda graph_spec */
                graph_spec?: (inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Properties[]|null);

                /** Cuda output_copy_stream */
                output_copy_stream?: (boolean|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a Cuda. */
            type $Shape = inference.ModelOptimizationPolicy.Cuda.$Properties;

            /**
             * Properties of a GraphSpec.
             * @deprecated Use inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Properties instead.
             */
            interface IGraphSpec extends inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Properties {
            }

            /** Represents a GraphSpec. */
            class GraphSpec {

                /**
                 * Constructs a new GraphSpec.
                 * @param [properties] Properties to set
                 */
                constructor(properties?: inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Properties);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];

                /** GraphSpec batch_size. */
                batch_size: number;

                /** GraphSpec input. */
                input: { [k: string]: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties };

                /** GraphSpec graph_lower_bound. */
                graph_lower_bound?: (inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Properties|null);

                /**
                 * Creates a new GraphSpec instance using the specified properties.
                 * @param [properties] Properties to set
                 * @returns GraphSpec instance
                 */
                static create(properties: inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Shape): inference.ModelOptimizationPolicy.Cuda.GraphSpec & inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Shape;
                static create(properties?: inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Properties): inference.ModelOptimizationPolicy.Cuda.GraphSpec;

                /**
                 * Encodes the specified GraphSpec message. Does not implicitly {@link inference.ModelOptimizationPolicy.Cuda.GraphSpec.verify|verify} messages.
                 * @param message GraphSpec message or plain object to encode
                 * @param [writer] Writer to encode to
                 * @returns Writer
                 */
                static encode(message: inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

                /**
                 * Decodes a GraphSpec message from the specified reader or buffer.
                 * @param reader Reader or buffer to decode from
                 * @param [length] Message length if known beforehand
                 * @returns {inference.ModelOptimizationPolicy.Cuda.GraphSpec & inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Shape} GraphSpec
                 * @throws {Error} If the payload is not a reader or valid buffer
                 * @throws {$protobuf.util.ProtocolError} If required fields are missing
                 */
                static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy.Cuda.GraphSpec & inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Shape;

                /**
                 * Creates a GraphSpec message from a plain object. Also converts values to their respective internal types.
                 * @param object Plain object
                 * @returns GraphSpec
                 */
                static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy.Cuda.GraphSpec;

                /**
                 * Creates a plain object from a GraphSpec message. Also converts values to other types if specified.
                 * @param message GraphSpec
                 * @param [options] Conversion options
                 * @returns Plain object
                 */
                static toObject(message: inference.ModelOptimizationPolicy.Cuda.GraphSpec, options?: $protobuf.IConversionOptions): { [k: string]: any };

                /**
                 * Converts this GraphSpec to JSON.
                 * @returns JSON object
                 */
                toJSON(): { [k: string]: any };
            }

            namespace GraphSpec {

                /** Properties of a GraphSpec. */
                interface $Properties {

                    /** GraphSpec batch_size */
                    batch_size?: (number|null);

                    /** GraphSpec input */
                    input?: ({ [k: string]: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties }|null);

                    /** GraphSpec graph_lower_bound */
                    graph_lower_bound?: (inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Properties|null);

                    /** Unknown fields preserved while decoding when enabled */
                    $unknowns?: Uint8Array[];
                }

                /** Shape of a GraphSpec. */
                type $Shape = inference.ModelOptimizationPolicy.Cuda.GraphSpec.$Properties;

                /**
                 * Properties of a Shape.
                 * @deprecated Use inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties instead.
                 */
                interface IShape extends inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties {
                }

                /** Represents a Shape. */
                class Shape {

                    /**
                     * Constructs a new Shape.
                     * @param [properties] Properties to set
                     */
                    constructor(properties?: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties);

                    /** Unknown fields preserved while decoding when enabled */
                    $unknowns?: Uint8Array[];

                    /** Shape dim. */
                    dim: (number|Long)[];

                    /**
                     * Creates a new Shape instance using the specified properties.
                     * @param [properties] Properties to set
                     * @returns Shape instance
                     */
                    static create(properties: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Shape): inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape & inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Shape;
                    static create(properties?: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties): inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape;

                    /**
                     * Encodes the specified Shape message. Does not implicitly {@link inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.verify|verify} messages.
                     * @param message Shape message or plain object to encode
                     * @param [writer] Writer to encode to
                     * @returns Writer
                     */
                    static encode(message: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

                    /**
                     * Decodes a Shape message from the specified reader or buffer.
                     * @param reader Reader or buffer to decode from
                     * @param [length] Message length if known beforehand
                     * @returns {inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape & inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Shape} Shape
                     * @throws {Error} If the payload is not a reader or valid buffer
                     * @throws {$protobuf.util.ProtocolError} If required fields are missing
                     */
                    static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape & inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Shape;

                    /**
                     * Creates a Shape message from a plain object. Also converts values to their respective internal types.
                     * @param object Plain object
                     * @returns Shape
                     */
                    static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape;

                    /**
                     * Creates a plain object from a Shape message. Also converts values to other types if specified.
                     * @param message Shape
                     * @param [options] Conversion options
                     * @returns Plain object
                     */
                    static toObject(message: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape, options?: $protobuf.IConversionOptions): { [k: string]: any };

                    /**
                     * Converts this Shape to JSON.
                     * @returns JSON object
                     */
                    toJSON(): { [k: string]: any };
                }

                namespace Shape {

                    /** Properties of a Shape. */
                    interface $Properties {

                        /** Shape dim */
                        dim?: ((number|Long)[]|null);

                        /** Unknown fields preserved while decoding when enabled */
                        $unknowns?: Uint8Array[];
                    }

                    /** Shape of a Shape. */
                    type $Shape = inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties;
                }

                /**
                 * Properties of a LowerBound.
                 * @deprecated Use inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Properties instead.
                 */
                interface ILowerBound extends inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Properties {
                }

                /** Represents a LowerBound. */
                class LowerBound {

                    /**
                     * Constructs a new LowerBound.
                     * @param [properties] Properties to set
                     */
                    constructor(properties?: inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Properties);

                    /** Unknown fields preserved while decoding when enabled */
                    $unknowns?: Uint8Array[];

                    /** LowerBound batch_size. */
                    batch_size: number;

                    /** LowerBound input. */
                    input: { [k: string]: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties };

                    /**
                     * Creates a new LowerBound instance using the specified properties.
                     * @param [properties] Properties to set
                     * @returns LowerBound instance
                     */
                    static create(properties: inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Shape): inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound & inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Shape;
                    static create(properties?: inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Properties): inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound;

                    /**
                     * Encodes the specified LowerBound message. Does not implicitly {@link inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.verify|verify} messages.
                     * @param message LowerBound message or plain object to encode
                     * @param [writer] Writer to encode to
                     * @returns Writer
                     */
                    static encode(message: inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

                    /**
                     * Decodes a LowerBound message from the specified reader or buffer.
                     * @param reader Reader or buffer to decode from
                     * @param [length] Message length if known beforehand
                     * @returns {inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound & inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Shape} LowerBound
                     * @throws {Error} If the payload is not a reader or valid buffer
                     * @throws {$protobuf.util.ProtocolError} If required fields are missing
                     */
                    static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound & inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Shape;

                    /**
                     * Creates a LowerBound message from a plain object. Also converts values to their respective internal types.
                     * @param object Plain object
                     * @returns LowerBound
                     */
                    static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound;

                    /**
                     * Creates a plain object from a LowerBound message. Also converts values to other types if specified.
                     * @param message LowerBound
                     * @param [options] Conversion options
                     * @returns Plain object
                     */
                    static toObject(message: inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound, options?: $protobuf.IConversionOptions): { [k: string]: any };

                    /**
                     * Converts this LowerBound to JSON.
                     * @returns JSON object
                     */
                    toJSON(): { [k: string]: any };
                }

                namespace LowerBound {

                    /** Properties of a LowerBound. */
                    interface $Properties {

                        /** LowerBound batch_size */
                        batch_size?: (number|null);

                        /** LowerBound input */
                        input?: ({ [k: string]: inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.$Properties }|null);

                        /** Unknown fields preserved while decoding when enabled */
                        $unknowns?: Uint8Array[];
                    }

                    /** Shape of a LowerBound. */
                    type $Shape = inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound.$Properties;
                }
            }
        }

        /**
         * Properties of an ExecutionAccelerators.
         * @deprecated Use inference.ModelOptimizationPolicy.ExecutionAccelerators.$Properties instead.
         */
        interface IExecutionAccelerators extends inference.ModelOptimizationPolicy.ExecutionAccelerators.$Properties {
        }

        /** Represents an ExecutionAccelerators. */
        class ExecutionAccelerators {

            /**
             * Constructs a new ExecutionAccelerators.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelOptimizationPolicy.ExecutionAccelerators.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** ExecutionAccelerators gpu_execution_accelerator. */
            gpu_execution_accelerator: inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties[];

            /** ExecutionAccelerators cpu_execution_accelerator. */
            cpu_execution_accelerator: inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties[];

            /**
             * Creates a new ExecutionAccelerators instance using the specified properties.
             * @param [properties] Properties to set
             * @returns ExecutionAccelerators instance
             */
            static create(properties: inference.ModelOptimizationPolicy.ExecutionAccelerators.$Shape): inference.ModelOptimizationPolicy.ExecutionAccelerators & inference.ModelOptimizationPolicy.ExecutionAccelerators.$Shape;
            static create(properties?: inference.ModelOptimizationPolicy.ExecutionAccelerators.$Properties): inference.ModelOptimizationPolicy.ExecutionAccelerators;

            /**
             * Encodes the specified ExecutionAccelerators message. Does not implicitly {@link inference.ModelOptimizationPolicy.ExecutionAccelerators.verify|verify} messages.
             * @param message ExecutionAccelerators message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelOptimizationPolicy.ExecutionAccelerators.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes an ExecutionAccelerators message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelOptimizationPolicy.ExecutionAccelerators & inference.ModelOptimizationPolicy.ExecutionAccelerators.$Shape} ExecutionAccelerators
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy.ExecutionAccelerators & inference.ModelOptimizationPolicy.ExecutionAccelerators.$Shape;

            /**
             * Creates an ExecutionAccelerators message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns ExecutionAccelerators
             */
            static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy.ExecutionAccelerators;

            /**
             * Creates a plain object from an ExecutionAccelerators message. Also converts values to other types if specified.
             * @param message ExecutionAccelerators
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelOptimizationPolicy.ExecutionAccelerators, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this ExecutionAccelerators to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace ExecutionAccelerators {

            /** Properties of an ExecutionAccelerators. */
            interface $Properties {

                /** ExecutionAccelerators gpu_execution_accelerator */
                gpu_execution_accelerator?: (inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties[]|null);

                /** ExecutionAccelerators cpu_execution_accelerator */
                cpu_execution_accelerator?: (inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties[]|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of an ExecutionAccelerators. */
            type $Shape = inference.ModelOptimizationPolicy.ExecutionAccelerators.$Properties;

            /**
             * Properties of an Accelerator.
             * @deprecated Use inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties instead.
             */
            interface IAccelerator extends inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties {
            }

            /** Represents an Accelerator. */
            class Accelerator {

                /**
                 * Constructs a new Accelerator.
                 * @param [properties] Properties to set
                 */
                constructor(properties?: inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];

                /** Accelerator name. */
                name: string;

                /** Accelerator parameters. */
                parameters: { [k: string]: string };

                /**
                 * Creates a new Accelerator instance using the specified properties.
                 * @param [properties] Properties to set
                 * @returns Accelerator instance
                 */
                static create(properties: inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Shape): inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator & inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Shape;
                static create(properties?: inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties): inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator;

                /**
                 * Encodes the specified Accelerator message. Does not implicitly {@link inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.verify|verify} messages.
                 * @param message Accelerator message or plain object to encode
                 * @param [writer] Writer to encode to
                 * @returns Writer
                 */
                static encode(message: inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

                /**
                 * Decodes an Accelerator message from the specified reader or buffer.
                 * @param reader Reader or buffer to decode from
                 * @param [length] Message length if known beforehand
                 * @returns {inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator & inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Shape} Accelerator
                 * @throws {Error} If the payload is not a reader or valid buffer
                 * @throws {$protobuf.util.ProtocolError} If required fields are missing
                 */
                static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator & inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Shape;

                /**
                 * Creates an Accelerator message from a plain object. Also converts values to their respective internal types.
                 * @param object Plain object
                 * @returns Accelerator
                 */
                static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator;

                /**
                 * Creates a plain object from an Accelerator message. Also converts values to other types if specified.
                 * @param message Accelerator
                 * @param [options] Conversion options
                 * @returns Plain object
                 */
                static toObject(message: inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator, options?: $protobuf.IConversionOptions): { [k: string]: any };

                /**
                 * Converts this Accelerator to JSON.
                 * @returns JSON object
                 */
                toJSON(): { [k: string]: any };
            }

            namespace Accelerator {

                /** Properties of an Accelerator. */
                interface $Properties {

                    /** Accelerator name */
                    name?: (string|null);

                    /** Accelerator parameters */
                    parameters?: ({ [k: string]: string }|null);

                    /** Unknown fields preserved while decoding when enabled */
                    $unknowns?: Uint8Array[];
                }

                /** Shape of an Accelerator. */
                type $Shape = inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator.$Properties;
            }
        }

        /**
         * Properties of a PinnedMemoryBuffer.
         * @deprecated Use inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties instead.
         */
        interface IPinnedMemoryBuffer extends inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties {
        }

        /** Represents a PinnedMemoryBuffer. */
        class PinnedMemoryBuffer {

            /**
             * Constructs a new PinnedMemoryBuffer.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** PinnedMemoryBuffer enable. */
            enable: boolean;

            /**
             * Creates a new PinnedMemoryBuffer instance using the specified properties.
             * @param [properties] Properties to set
             * @returns PinnedMemoryBuffer instance
             */
            static create(properties: inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Shape): inference.ModelOptimizationPolicy.PinnedMemoryBuffer & inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Shape;
            static create(properties?: inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties): inference.ModelOptimizationPolicy.PinnedMemoryBuffer;

            /**
             * Encodes the specified PinnedMemoryBuffer message. Does not implicitly {@link inference.ModelOptimizationPolicy.PinnedMemoryBuffer.verify|verify} messages.
             * @param message PinnedMemoryBuffer message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a PinnedMemoryBuffer message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelOptimizationPolicy.PinnedMemoryBuffer & inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Shape} PinnedMemoryBuffer
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOptimizationPolicy.PinnedMemoryBuffer & inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Shape;

            /**
             * Creates a PinnedMemoryBuffer message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns PinnedMemoryBuffer
             */
            static fromObject(object: { [k: string]: any }): inference.ModelOptimizationPolicy.PinnedMemoryBuffer;

            /**
             * Creates a plain object from a PinnedMemoryBuffer message. Also converts values to other types if specified.
             * @param message PinnedMemoryBuffer
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelOptimizationPolicy.PinnedMemoryBuffer, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this PinnedMemoryBuffer to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace PinnedMemoryBuffer {

            /** Properties of a PinnedMemoryBuffer. */
            interface $Properties {

                /** PinnedMemoryBuffer enable */
                enable?: (boolean|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a PinnedMemoryBuffer. */
            type $Shape = inference.ModelOptimizationPolicy.PinnedMemoryBuffer.$Properties;
        }
    }

    /**
     * Properties of a ModelQueuePolicy.
     * @deprecated Use inference.ModelQueuePolicy.$Properties instead.
     */
    interface IModelQueuePolicy extends inference.ModelQueuePolicy.$Properties {
    }

    /** Represents a ModelQueuePolicy. */
    class ModelQueuePolicy {

        /**
         * Constructs a new ModelQueuePolicy.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelQueuePolicy.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelQueuePolicy timeout_action. */
        timeout_action: inference.ModelQueuePolicy.TimeoutAction;

        /** ModelQueuePolicy default_timeout_microseconds. */
        default_timeout_microseconds: (number|Long);

        /** ModelQueuePolicy allow_timeout_override. */
        allow_timeout_override: boolean;

        /** ModelQueuePolicy max_queue_size. */
        max_queue_size: number;

        /**
         * Creates a new ModelQueuePolicy instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelQueuePolicy instance
         */
        static create(properties: inference.ModelQueuePolicy.$Shape): inference.ModelQueuePolicy & inference.ModelQueuePolicy.$Shape;
        static create(properties?: inference.ModelQueuePolicy.$Properties): inference.ModelQueuePolicy;

        /**
         * Encodes the specified ModelQueuePolicy message. Does not implicitly {@link inference.ModelQueuePolicy.verify|verify} messages.
         * @param message ModelQueuePolicy message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelQueuePolicy.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelQueuePolicy message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelQueuePolicy & inference.ModelQueuePolicy.$Shape} ModelQueuePolicy
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelQueuePolicy & inference.ModelQueuePolicy.$Shape;

        /**
         * Creates a ModelQueuePolicy message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelQueuePolicy
         */
        static fromObject(object: { [k: string]: any }): inference.ModelQueuePolicy;

        /**
         * Creates a plain object from a ModelQueuePolicy message. Also converts values to other types if specified.
         * @param message ModelQueuePolicy
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelQueuePolicy, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelQueuePolicy to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelQueuePolicy {

        /** Properties of a ModelQueuePolicy. */
        interface $Properties {

            /** ModelQueuePolicy timeout_action */
            timeout_action?: (inference.ModelQueuePolicy.TimeoutAction|null);

            /** ModelQueuePolicy default_timeout_microseconds */
            default_timeout_microseconds?: (number|Long|null);

            /** ModelQueuePolicy allow_timeout_override */
            allow_timeout_override?: (boolean|null);

            /** ModelQueuePolicy max_queue_size */
            max_queue_size?: (number|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelQueuePolicy. */
        type $Shape = inference.ModelQueuePolicy.$Properties;

        /** TimeoutAction enum. */
        enum TimeoutAction {

            /** REJECT value */
            REJECT = 0,

            /** DELAY value */
            DELAY = 1
        }
    }

    /**
     * Properties of a ModelDynamicBatching.
     * @deprecated Use inference.ModelDynamicBatching.$Properties instead.
     */
    interface IModelDynamicBatching extends inference.ModelDynamicBatching.$Properties {
    }

    /** Represents a ModelDynamicBatching. */
    class ModelDynamicBatching {

        /**
         * Constructs a new ModelDynamicBatching.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelDynamicBatching.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelDynamicBatching preferred_batch_size. */
        preferred_batch_size: number[];

        /** ModelDynamicBatching max_queue_delay_microseconds. */
        max_queue_delay_microseconds: (number|Long);

        /** ModelDynamicBatching preserve_ordering. */
        preserve_ordering: boolean;

        /** ModelDynamicBatching priority_levels. */
        priority_levels: (number|Long);

        /** ModelDynamicBatching default_priority_level. */
        default_priority_level: (number|Long);

        /** ModelDynamicBatching default_queue_policy. */
        default_queue_policy?: (inference.ModelQueuePolicy.$Properties|null);

        /** ModelDynamicBatching priority_queue_policy. */
        priority_queue_policy: { [k: string]: inference.ModelQueuePolicy.$Properties };

        /**
         * Creates a new ModelDynamicBatching instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelDynamicBatching instance
         */
        static create(properties: inference.ModelDynamicBatching.$Shape): inference.ModelDynamicBatching & inference.ModelDynamicBatching.$Shape;
        static create(properties?: inference.ModelDynamicBatching.$Properties): inference.ModelDynamicBatching;

        /**
         * Encodes the specified ModelDynamicBatching message. Does not implicitly {@link inference.ModelDynamicBatching.verify|verify} messages.
         * @param message ModelDynamicBatching message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelDynamicBatching.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelDynamicBatching message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelDynamicBatching & inference.ModelDynamicBatching.$Shape} ModelDynamicBatching
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelDynamicBatching & inference.ModelDynamicBatching.$Shape;

        /**
         * Creates a ModelDynamicBatching message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelDynamicBatching
         */
        static fromObject(object: { [k: string]: any }): inference.ModelDynamicBatching;

        /**
         * Creates a plain object from a ModelDynamicBatching message. Also converts values to other types if specified.
         * @param message ModelDynamicBatching
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelDynamicBatching, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelDynamicBatching to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelDynamicBatching {

        /** Properties of a ModelDynamicBatching. */
        interface $Properties {

            /** ModelDynamicBatching preferred_batch_size */
            preferred_batch_size?: (number[]|null);

            /** ModelDynamicBatching max_queue_delay_microseconds */
            max_queue_delay_microseconds?: (number|Long|null);

            /** ModelDynamicBatching preserve_ordering */
            preserve_ordering?: (boolean|null);

            /** ModelDynamicBatching priority_levels */
            priority_levels?: (number|Long|null);

            /** ModelDynamicBatching default_priority_level */
            default_priority_level?: (number|Long|null);

            /** ModelDynamicBatching default_queue_policy */
            default_queue_policy?: (inference.ModelQueuePolicy.$Properties|null);

            /** ModelDynamicBatching priority_queue_policy */
            priority_queue_policy?: ({ [k: string]: inference.ModelQueuePolicy.$Properties }|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelDynamicBatching. */
        type $Shape = inference.ModelDynamicBatching.$Properties;
    }

    /**
     * Properties of a ModelSequenceBatching.
     * @deprecated Use inference.ModelSequenceBatching.$Properties instead.
     */
    interface IModelSequenceBatching extends inference.ModelSequenceBatching.$Properties {
    }

    /** Represents a ModelSequenceBatching. */
    class ModelSequenceBatching {

        /**
         * Constructs a new ModelSequenceBatching.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelSequenceBatching.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelSequenceBatching direct. */
        direct?: (inference.ModelSequenceBatching.StrategyDirect.$Properties|null);

        /** ModelSequenceBatching oldest. */
        oldest?: (inference.ModelSequenceBatching.StrategyOldest.$Properties|null);

        /** ModelSequenceBatching max_sequence_idle_microseconds. */
        max_sequence_idle_microseconds: (number|Long);

        /** ModelSequenceBatching control_input. */
        control_input: inference.ModelSequenceBatching.ControlInput.$Properties[];

        /** ModelSequenceBatching state. */
        state: inference.ModelSequenceBatching.State.$Properties[];

        /** ModelSequenceBatching iterative_sequence. */
        iterative_sequence: boolean;

        /** ModelSequenceBatching strategy_choice. */
        strategy_choice?: ("direct"|"oldest");

        /**
         * Creates a new ModelSequenceBatching instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelSequenceBatching instance
         */
        static create(properties: inference.ModelSequenceBatching.$Shape): inference.ModelSequenceBatching & inference.ModelSequenceBatching.$Shape;
        static create(properties?: inference.ModelSequenceBatching.$Properties): inference.ModelSequenceBatching;

        /**
         * Encodes the specified ModelSequenceBatching message. Does not implicitly {@link inference.ModelSequenceBatching.verify|verify} messages.
         * @param message ModelSequenceBatching message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelSequenceBatching.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelSequenceBatching message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelSequenceBatching & inference.ModelSequenceBatching.$Shape} ModelSequenceBatching
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelSequenceBatching & inference.ModelSequenceBatching.$Shape;

        /**
         * Creates a ModelSequenceBatching message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelSequenceBatching
         */
        static fromObject(object: { [k: string]: any }): inference.ModelSequenceBatching;

        /**
         * Creates a plain object from a ModelSequenceBatching message. Also converts values to other types if specified.
         * @param message ModelSequenceBatching
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelSequenceBatching, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelSequenceBatching to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelSequenceBatching {

        /** Properties of a ModelSequenceBatching. */
        interface $Properties {

            /** ModelSequenceBatching direct */
            direct?: (inference.ModelSequenceBatching.StrategyDirect.$Properties|null);

            /** ModelSequenceBatching oldest */
            oldest?: (inference.ModelSequenceBatching.StrategyOldest.$Properties|null);

            /** ModelSequenceBatching max_sequence_idle_microseconds */
            max_sequence_idle_microseconds?: (number|Long|null);

            /** ModelSequenceBatching control_input */
            control_input?: (inference.ModelSequenceBatching.ControlInput.$Properties[]|null);

            /** ModelSequenceBatching state */
            state?: (inference.ModelSequenceBatching.State.$Properties[]|null);

            /** ModelSequenceBatching iterative_sequence */
            iterative_sequence?: (boolean|null);

            /** ModelSequenceBatching strategy_choice */
            strategy_choice?: ("direct"|"oldest");

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Narrowed shape of a ModelSequenceBatching. */
        type $Shape = {
          direct?: inference.ModelSequenceBatching.StrategyDirect.$Shape|null;
          oldest?: inference.ModelSequenceBatching.StrategyOldest.$Shape|null;
          max_sequence_idle_microseconds?: number|Long|null;
          control_input?: inference.ModelSequenceBatching.ControlInput.$Shape[]|null;
          state?: inference.ModelSequenceBatching.State.$Shape[]|null;
          iterative_sequence?: boolean|null;
          $unknowns?: Uint8Array[];
        } & (
          ({ strategy_choice?: undefined; direct?: null; oldest?: null }|{ strategy_choice?: "direct"; direct: inference.ModelSequenceBatching.StrategyDirect.$Shape; oldest?: null }|{ strategy_choice?: "oldest"; direct?: null; oldest: inference.ModelSequenceBatching.StrategyOldest.$Shape })
        );

        /**
         * Properties of a Control.
         * @deprecated Use inference.ModelSequenceBatching.Control.$Properties instead.
         */
        interface IControl extends inference.ModelSequenceBatching.Control.$Properties {
        }

        /** Represents a Control. */
        class Control {

            /**
             * Constructs a new Control.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelSequenceBatching.Control.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Control kind. */
            kind: inference.ModelSequenceBatching.Control.Kind;

            /** Control int32_false_true. */
            int32_false_true: number[];

            /** Control fp32_false_true. */
            fp32_false_true: number[];

            /** Control bool_false_true. */
            bool_false_true: boolean[];

            /** Control data_type. */
            data_type: inference.DataType;

            /**
             * Creates a new Control instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Control instance
             */
            static create(properties: inference.ModelSequenceBatching.Control.$Shape): inference.ModelSequenceBatching.Control & inference.ModelSequenceBatching.Control.$Shape;
            static create(properties?: inference.ModelSequenceBatching.Control.$Properties): inference.ModelSequenceBatching.Control;

            /**
             * Encodes the specified Control message. Does not implicitly {@link inference.ModelSequenceBatching.Control.verify|verify} messages.
             * @param message Control message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelSequenceBatching.Control.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a Control message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelSequenceBatching.Control & inference.ModelSequenceBatching.Control.$Shape} Control
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelSequenceBatching.Control & inference.ModelSequenceBatching.Control.$Shape;

            /**
             * Creates a Control message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Control
             */
            static fromObject(object: { [k: string]: any }): inference.ModelSequenceBatching.Control;

            /**
             * Creates a plain object from a Control message. Also converts values to other types if specified.
             * @param message Control
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelSequenceBatching.Control, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Control to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Control {

            /** Properties of a Control. */
            interface $Properties {

                /** Control kind */
                kind?: (inference.ModelSequenceBatching.Control.Kind|null);

                /** Control int32_false_true */
                int32_false_true?: (number[]|null);

                /** Control fp32_false_true */
                fp32_false_true?: (number[]|null);

                /** Control bool_false_true */
                bool_false_true?: (boolean[]|null);

                /** Control data_type */
                data_type?: (inference.DataType|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a Control. */
            type $Shape = inference.ModelSequenceBatching.Control.$Properties;

            /** Kind enum. */
            enum Kind {

                /** CONTROL_SEQUENCE_START value */
                CONTROL_SEQUENCE_START = 0,

                /** CONTROL_SEQUENCE_READY value */
                CONTROL_SEQUENCE_READY = 1,

                /** CONTROL_SEQUENCE_END value */
                CONTROL_SEQUENCE_END = 2,

                /** CONTROL_SEQUENCE_CORRID value */
                CONTROL_SEQUENCE_CORRID = 3
            }
        }

        /**
         * Properties of a ControlInput.
         * @deprecated Use inference.ModelSequenceBatching.ControlInput.$Properties instead.
         */
        interface IControlInput extends inference.ModelSequenceBatching.ControlInput.$Properties {
        }

        /** Represents a ControlInput. */
        class ControlInput {

            /**
             * Constructs a new ControlInput.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelSequenceBatching.ControlInput.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** ControlInput name. */
            name: string;

            /** ControlInput control. */
            control: inference.ModelSequenceBatching.Control.$Properties[];

            /**
             * Creates a new ControlInput instance using the specified properties.
             * @param [properties] Properties to set
             * @returns ControlInput instance
             */
            static create(properties: inference.ModelSequenceBatching.ControlInput.$Shape): inference.ModelSequenceBatching.ControlInput & inference.ModelSequenceBatching.ControlInput.$Shape;
            static create(properties?: inference.ModelSequenceBatching.ControlInput.$Properties): inference.ModelSequenceBatching.ControlInput;

            /**
             * Encodes the specified ControlInput message. Does not implicitly {@link inference.ModelSequenceBatching.ControlInput.verify|verify} messages.
             * @param message ControlInput message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelSequenceBatching.ControlInput.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a ControlInput message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelSequenceBatching.ControlInput & inference.ModelSequenceBatching.ControlInput.$Shape} ControlInput
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelSequenceBatching.ControlInput & inference.ModelSequenceBatching.ControlInput.$Shape;

            /**
             * Creates a ControlInput message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns ControlInput
             */
            static fromObject(object: { [k: string]: any }): inference.ModelSequenceBatching.ControlInput;

            /**
             * Creates a plain object from a ControlInput message. Also converts values to other types if specified.
             * @param message ControlInput
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelSequenceBatching.ControlInput, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this ControlInput to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace ControlInput {

            /** Properties of a ControlInput. */
            interface $Properties {

                /** ControlInput name */
                name?: (string|null);

                /** ControlInput control */
                control?: (inference.ModelSequenceBatching.Control.$Properties[]|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a ControlInput. */
            type $Shape = inference.ModelSequenceBatching.ControlInput.$Properties;
        }

        /**
         * Properties of an InitialState.
         * @deprecated Use inference.ModelSequenceBatching.InitialState.$Properties instead.
         */
        interface IInitialState extends inference.ModelSequenceBatching.InitialState.$Properties {
        }

        /** Represents an InitialState. */
        class InitialState {

            /**
             * Constructs a new InitialState.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelSequenceBatching.InitialState.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** InitialState data_type. */
            data_type: inference.DataType;

            /** InitialState dims. */
            dims: (number|Long)[];

            /** InitialState zero_data. */
            zero_data?: (boolean|null);

            /** InitialState data_file. */
            data_file?: (string|null);

            /** InitialState name. */
            name: string;

            /** InitialState state_data. */
            state_data?: ("zero_data"|"data_file");

            /**
             * Creates a new InitialState instance using the specified properties.
             * @param [properties] Properties to set
             * @returns InitialState instance
             */
            static create(properties: inference.ModelSequenceBatching.InitialState.$Shape): inference.ModelSequenceBatching.InitialState & inference.ModelSequenceBatching.InitialState.$Shape;
            static create(properties?: inference.ModelSequenceBatching.InitialState.$Properties): inference.ModelSequenceBatching.InitialState;

            /**
             * Encodes the specified InitialState message. Does not implicitly {@link inference.ModelSequenceBatching.InitialState.verify|verify} messages.
             * @param message InitialState message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelSequenceBatching.InitialState.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes an InitialState message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelSequenceBatching.InitialState & inference.ModelSequenceBatching.InitialState.$Shape} InitialState
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelSequenceBatching.InitialState & inference.ModelSequenceBatching.InitialState.$Shape;

            /**
             * Creates an InitialState message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns InitialState
             */
            static fromObject(object: { [k: string]: any }): inference.ModelSequenceBatching.InitialState;

            /**
             * Creates a plain object from an InitialState message. Also converts values to other types if specified.
             * @param message InitialState
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelSequenceBatching.InitialState, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this InitialState to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace InitialState {

            /** Properties of an InitialState. */
            interface $Properties {

                /** InitialState data_type */
                data_type?: (inference.DataType|null);

                /** InitialState dims */
                dims?: ((number|Long)[]|null);

                /** InitialState zero_data */
                zero_data?: (boolean|null);

                /** InitialState data_file */
                data_file?: (string|null);

                /** InitialState name */
                name?: (string|null);

                /** InitialState state_data */
                state_data?: ("zero_data"|"data_file");

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Narrowed shape of an InitialState. */
            type $Shape = {
              data_type?: inference.DataType|null;
              dims?: (number|Long)[]|null;
              zero_data?: boolean|null;
              data_file?: string|null;
              name?: string|null;
              $unknowns?: Uint8Array[];
            } & (
              ({ state_data?: undefined; zero_data?: null; data_file?: null }|{ state_data?: "zero_data"; zero_data: boolean; data_file?: null }|{ state_data?: "data_file"; zero_data?: null; data_file: string })
            );
        }

        /**
         * Properties of a State.
         * @deprecated Use inference.ModelSequenceBatching.State.$Properties instead.
         */
        interface IState extends inference.ModelSequenceBatching.State.$Properties {
        }

        /** Represents a State. */
        class State {

            /**
             * Constructs a new State.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelSequenceBatching.State.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** State input_name. */
            input_name: string;

            /** State output_name. */
            output_name: string;

            /** State data_type. */
            data_type: inference.DataType;

            /** State dims. */
            dims: (number|Long)[];

            /** State initial_state. */
            initial_state: inference.ModelSequenceBatching.InitialState.$Properties[];

            /** State use_same_buffer_for_input_output. */
            use_same_buffer_for_input_output: boolean;

            /** State use_growable_memory. */
            use_growable_memory: boolean;

            /**
             * Creates a new State instance using the specified properties.
             * @param [properties] Properties to set
             * @returns State instance
             */
            static create(properties: inference.ModelSequenceBatching.State.$Shape): inference.ModelSequenceBatching.State & inference.ModelSequenceBatching.State.$Shape;
            static create(properties?: inference.ModelSequenceBatching.State.$Properties): inference.ModelSequenceBatching.State;

            /**
             * Encodes the specified State message. Does not implicitly {@link inference.ModelSequenceBatching.State.verify|verify} messages.
             * @param message State message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelSequenceBatching.State.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a State message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelSequenceBatching.State & inference.ModelSequenceBatching.State.$Shape} State
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelSequenceBatching.State & inference.ModelSequenceBatching.State.$Shape;

            /**
             * Creates a State message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns State
             */
            static fromObject(object: { [k: string]: any }): inference.ModelSequenceBatching.State;

            /**
             * Creates a plain object from a State message. Also converts values to other types if specified.
             * @param message State
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelSequenceBatching.State, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this State to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace State {

            /** Properties of a State. */
            interface $Properties {

                /** State input_name */
                input_name?: (string|null);

                /** State output_name */
                output_name?: (string|null);

                /** State data_type */
                data_type?: (inference.DataType|null);

                /** State dims */
                dims?: ((number|Long)[]|null);

                /** State initial_state */
                initial_state?: (inference.ModelSequenceBatching.InitialState.$Properties[]|null);

                /** State use_same_buffer_for_input_output */
                use_same_buffer_for_input_output?: (boolean|null);

                /** State use_growable_memory */
                use_growable_memory?: (boolean|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a State. */
            type $Shape = {
              input_name?: string|null;
              output_name?: string|null;
              data_type?: inference.DataType|null;
              dims?: (number|Long)[]|null;
              initial_state?: inference.ModelSequenceBatching.InitialState.$Shape[]|null;
              use_same_buffer_for_input_output?: boolean|null;
              use_growable_memory?: boolean|null;
              $unknowns?: Uint8Array[];
            };
        }

        /**
         * Properties of a StrategyDirect.
         * @deprecated Use inference.ModelSequenceBatching.StrategyDirect.$Properties instead.
         */
        interface IStrategyDirect extends inference.ModelSequenceBatching.StrategyDirect.$Properties {
        }

        /** Represents a StrategyDirect. */
        class StrategyDirect {

            /**
             * Constructs a new StrategyDirect.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelSequenceBatching.StrategyDirect.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** StrategyDirect max_queue_delay_microseconds. */
            max_queue_delay_microseconds: (number|Long);

            /** StrategyDirect minimum_slot_utilization. */
            minimum_slot_utilization: number;

            /**
             * Creates a new StrategyDirect instance using the specified properties.
             * @param [properties] Properties to set
             * @returns StrategyDirect instance
             */
            static create(properties: inference.ModelSequenceBatching.StrategyDirect.$Shape): inference.ModelSequenceBatching.StrategyDirect & inference.ModelSequenceBatching.StrategyDirect.$Shape;
            static create(properties?: inference.ModelSequenceBatching.StrategyDirect.$Properties): inference.ModelSequenceBatching.StrategyDirect;

            /**
             * Encodes the specified StrategyDirect message. Does not implicitly {@link inference.ModelSequenceBatching.StrategyDirect.verify|verify} messages.
             * @param message StrategyDirect message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelSequenceBatching.StrategyDirect.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a StrategyDirect message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelSequenceBatching.StrategyDirect & inference.ModelSequenceBatching.StrategyDirect.$Shape} StrategyDirect
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelSequenceBatching.StrategyDirect & inference.ModelSequenceBatching.StrategyDirect.$Shape;

            /**
             * Creates a StrategyDirect message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns StrategyDirect
             */
            static fromObject(object: { [k: string]: any }): inference.ModelSequenceBatching.StrategyDirect;

            /**
             * Creates a plain object from a StrategyDirect message. Also converts values to other types if specified.
             * @param message StrategyDirect
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelSequenceBatching.StrategyDirect, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this StrategyDirect to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace StrategyDirect {

            /** Properties of a StrategyDirect. */
            interface $Properties {

                /** StrategyDirect max_queue_delay_microseconds */
                max_queue_delay_microseconds?: (number|Long|null);

                /** StrategyDirect minimum_slot_utilization */
                minimum_slot_utilization?: (number|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a StrategyDirect. */
            type $Shape = inference.ModelSequenceBatching.StrategyDirect.$Properties;
        }

        /**
         * Properties of a StrategyOldest.
         * @deprecated Use inference.ModelSequenceBatching.StrategyOldest.$Properties instead.
         */
        interface IStrategyOldest extends inference.ModelSequenceBatching.StrategyOldest.$Properties {
        }

        /** Represents a StrategyOldest. */
        class StrategyOldest {

            /**
             * Constructs a new StrategyOldest.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelSequenceBatching.StrategyOldest.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** StrategyOldest max_candidate_sequences. */
            max_candidate_sequences: number;

            /** StrategyOldest preferred_batch_size. */
            preferred_batch_size: number[];

            /** StrategyOldest max_queue_delay_microseconds. */
            max_queue_delay_microseconds: (number|Long);

            /** StrategyOldest preserve_ordering. */
            preserve_ordering: boolean;

            /**
             * Creates a new StrategyOldest instance using the specified properties.
             * @param [properties] Properties to set
             * @returns StrategyOldest instance
             */
            static create(properties: inference.ModelSequenceBatching.StrategyOldest.$Shape): inference.ModelSequenceBatching.StrategyOldest & inference.ModelSequenceBatching.StrategyOldest.$Shape;
            static create(properties?: inference.ModelSequenceBatching.StrategyOldest.$Properties): inference.ModelSequenceBatching.StrategyOldest;

            /**
             * Encodes the specified StrategyOldest message. Does not implicitly {@link inference.ModelSequenceBatching.StrategyOldest.verify|verify} messages.
             * @param message StrategyOldest message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelSequenceBatching.StrategyOldest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a StrategyOldest message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelSequenceBatching.StrategyOldest & inference.ModelSequenceBatching.StrategyOldest.$Shape} StrategyOldest
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelSequenceBatching.StrategyOldest & inference.ModelSequenceBatching.StrategyOldest.$Shape;

            /**
             * Creates a StrategyOldest message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns StrategyOldest
             */
            static fromObject(object: { [k: string]: any }): inference.ModelSequenceBatching.StrategyOldest;

            /**
             * Creates a plain object from a StrategyOldest message. Also converts values to other types if specified.
             * @param message StrategyOldest
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelSequenceBatching.StrategyOldest, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this StrategyOldest to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace StrategyOldest {

            /** Properties of a StrategyOldest. */
            interface $Properties {

                /** StrategyOldest max_candidate_sequences */
                max_candidate_sequences?: (number|null);

                /** StrategyOldest preferred_batch_size */
                preferred_batch_size?: (number[]|null);

                /** StrategyOldest max_queue_delay_microseconds */
                max_queue_delay_microseconds?: (number|Long|null);

                /** StrategyOldest preserve_ordering */
                preserve_ordering?: (boolean|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a StrategyOldest. */
            type $Shape = inference.ModelSequenceBatching.StrategyOldest.$Properties;
        }
    }

    /**
     * Properties of a ModelEnsembling.
     * @deprecated Use inference.ModelEnsembling.$Properties instead.
     */
    interface IModelEnsembling extends inference.ModelEnsembling.$Properties {
    }

    /** Represents a ModelEnsembling. */
    class ModelEnsembling {

        /**
         * Constructs a new ModelEnsembling.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelEnsembling.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelEnsembling step. */
        step: inference.ModelEnsembling.Step.$Properties[];

        /** ModelEnsembling max_inflight_requests. */
        max_inflight_requests: number;

        /**
         * Creates a new ModelEnsembling instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelEnsembling instance
         */
        static create(properties: inference.ModelEnsembling.$Shape): inference.ModelEnsembling & inference.ModelEnsembling.$Shape;
        static create(properties?: inference.ModelEnsembling.$Properties): inference.ModelEnsembling;

        /**
         * Encodes the specified ModelEnsembling message. Does not implicitly {@link inference.ModelEnsembling.verify|verify} messages.
         * @param message ModelEnsembling message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelEnsembling.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelEnsembling message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelEnsembling & inference.ModelEnsembling.$Shape} ModelEnsembling
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelEnsembling & inference.ModelEnsembling.$Shape;

        /**
         * Creates a ModelEnsembling message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelEnsembling
         */
        static fromObject(object: { [k: string]: any }): inference.ModelEnsembling;

        /**
         * Creates a plain object from a ModelEnsembling message. Also converts values to other types if specified.
         * @param message ModelEnsembling
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelEnsembling, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelEnsembling to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelEnsembling {

        /** Properties of a ModelEnsembling. */
        interface $Properties {

            /** ModelEnsembling step */
            step?: (inference.ModelEnsembling.Step.$Properties[]|null);

            /** ModelEnsembling max_inflight_requests */
            max_inflight_requests?: (number|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelEnsembling. */
        type $Shape = inference.ModelEnsembling.$Properties;

        /**
         * Properties of a Step.
         * @deprecated Use inference.ModelEnsembling.Step.$Properties instead.
         */
        interface IStep extends inference.ModelEnsembling.Step.$Properties {
        }

        /** Represents a Step. */
        class Step {

            /**
             * Constructs a new Step.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelEnsembling.Step.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Step model_name. */
            model_name: string;

            /** Step model_version. */
            model_version: (number|Long);

            /** Step input_map. */
            input_map: { [k: string]: string };

            /** Step output_map. */
            output_map: { [k: string]: string };

            /** Step model_namespace. */
            model_namespace: string;

            /**
             * Creates a new Step instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Step instance
             */
            static create(properties: inference.ModelEnsembling.Step.$Shape): inference.ModelEnsembling.Step & inference.ModelEnsembling.Step.$Shape;
            static create(properties?: inference.ModelEnsembling.Step.$Properties): inference.ModelEnsembling.Step;

            /**
             * Encodes the specified Step message. Does not implicitly {@link inference.ModelEnsembling.Step.verify|verify} messages.
             * @param message Step message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelEnsembling.Step.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a Step message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelEnsembling.Step & inference.ModelEnsembling.Step.$Shape} Step
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelEnsembling.Step & inference.ModelEnsembling.Step.$Shape;

            /**
             * Creates a Step message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Step
             */
            static fromObject(object: { [k: string]: any }): inference.ModelEnsembling.Step;

            /**
             * Creates a plain object from a Step message. Also converts values to other types if specified.
             * @param message Step
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelEnsembling.Step, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Step to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Step {

            /** Properties of a Step. */
            interface $Properties {

                /** Step model_name */
                model_name?: (string|null);

                /** Step model_version */
                model_version?: (number|Long|null);

                /** Step input_map */
                input_map?: ({ [k: string]: string }|null);

                /** Step output_map */
                output_map?: ({ [k: string]: string }|null);

                /** Step model_namespace */
                model_namespace?: (string|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of a Step. */
            type $Shape = inference.ModelEnsembling.Step.$Properties;
        }
    }

    /**
     * Properties of a ModelParameter.
     * @deprecated Use inference.ModelParameter.$Properties instead.
     */
    interface IModelParameter extends inference.ModelParameter.$Properties {
    }

    /** Represents a ModelParameter. */
    class ModelParameter {

        /**
         * Constructs a new ModelParameter.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelParameter.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelParameter string_value. */
        string_value: string;

        /**
         * Creates a new ModelParameter instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelParameter instance
         */
        static create(properties: inference.ModelParameter.$Shape): inference.ModelParameter & inference.ModelParameter.$Shape;
        static create(properties?: inference.ModelParameter.$Properties): inference.ModelParameter;

        /**
         * Encodes the specified ModelParameter message. Does not implicitly {@link inference.ModelParameter.verify|verify} messages.
         * @param message ModelParameter message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelParameter.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelParameter message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelParameter & inference.ModelParameter.$Shape} ModelParameter
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelParameter & inference.ModelParameter.$Shape;

        /**
         * Creates a ModelParameter message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelParameter
         */
        static fromObject(object: { [k: string]: any }): inference.ModelParameter;

        /**
         * Creates a plain object from a ModelParameter message. Also converts values to other types if specified.
         * @param message ModelParameter
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelParameter, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelParameter to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelParameter {

        /** Properties of a ModelParameter. */
        interface $Properties {

            /** ModelParameter string_value */
            string_value?: (string|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelParameter. */
        type $Shape = inference.ModelParameter.$Properties;
    }

    /**
     * Properties of a ModelWarmup.
     * @deprecated Use inference.ModelWarmup.$Properties instead.
     */
    interface IModelWarmup extends inference.ModelWarmup.$Properties {
    }

    /** Represents a ModelWarmup. */
    class ModelWarmup {

        /**
         * Constructs a new ModelWarmup.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelWarmup.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelWarmup name. */
        name: string;

        /** ModelWarmup batch_size. */
        batch_size: number;

        /** ModelWarmup inputs. */
        inputs: { [k: string]: inference.ModelWarmup.Input.$Properties };

        /** ModelWarmup count. */
        count: number;

        /**
         * Creates a new ModelWarmup instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelWarmup instance
         */
        static create(properties: inference.ModelWarmup.$Shape): inference.ModelWarmup & inference.ModelWarmup.$Shape;
        static create(properties?: inference.ModelWarmup.$Properties): inference.ModelWarmup;

        /**
         * Encodes the specified ModelWarmup message. Does not implicitly {@link inference.ModelWarmup.verify|verify} messages.
         * @param message ModelWarmup message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelWarmup.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelWarmup message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelWarmup & inference.ModelWarmup.$Shape} ModelWarmup
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelWarmup & inference.ModelWarmup.$Shape;

        /**
         * Creates a ModelWarmup message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelWarmup
         */
        static fromObject(object: { [k: string]: any }): inference.ModelWarmup;

        /**
         * Creates a plain object from a ModelWarmup message. Also converts values to other types if specified.
         * @param message ModelWarmup
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelWarmup, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelWarmup to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelWarmup {

        /** Properties of a ModelWarmup. */
        interface $Properties {

            /** ModelWarmup name */
            name?: (string|null);

            /** ModelWarmup batch_size */
            batch_size?: (number|null);

            /** ModelWarmup inputs */
            inputs?: ({ [k: string]: inference.ModelWarmup.Input.$Properties }|null);

            /** ModelWarmup count */
            count?: (number|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelWarmup. */
        type $Shape = {
          name?: string|null;
          batch_size?: number|null;
          inputs?: { [k: string]: inference.ModelWarmup.Input.$Shape }|null;
          count?: number|null;
          $unknowns?: Uint8Array[];
        };

        /**
         * Properties of an Input.
         * @deprecated Use inference.ModelWarmup.Input.$Properties instead.
         */
        interface IInput extends inference.ModelWarmup.Input.$Properties {
        }

        /** Represents an Input. */
        class Input {

            /**
             * Constructs a new Input.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelWarmup.Input.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Input data_type. */
            data_type: inference.DataType;

            /** Input dims. */
            dims: (number|Long)[];

            /** Input zero_data. */
            zero_data?: (boolean|null);

            /** Input random_data. */
            random_data?: (boolean|null);

            /** Input input_data_file. */
            input_data_file?: (string|null);

            /** Input input_data_type. */
            input_data_type?: ("zero_data"|"random_data"|"input_data_file");

            /**
             * Creates a new Input instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Input instance
             */
            static create(properties: inference.ModelWarmup.Input.$Shape): inference.ModelWarmup.Input & inference.ModelWarmup.Input.$Shape;
            static create(properties?: inference.ModelWarmup.Input.$Properties): inference.ModelWarmup.Input;

            /**
             * Encodes the specified Input message. Does not implicitly {@link inference.ModelWarmup.Input.verify|verify} messages.
             * @param message Input message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelWarmup.Input.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes an Input message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelWarmup.Input & inference.ModelWarmup.Input.$Shape} Input
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelWarmup.Input & inference.ModelWarmup.Input.$Shape;

            /**
             * Creates an Input message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Input
             */
            static fromObject(object: { [k: string]: any }): inference.ModelWarmup.Input;

            /**
             * Creates a plain object from an Input message. Also converts values to other types if specified.
             * @param message Input
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelWarmup.Input, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Input to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Input {

            /** Properties of an Input. */
            interface $Properties {

                /** Input data_type */
                data_type?: (inference.DataType|null);

                /** Input dims */
                dims?: ((number|Long)[]|null);

                /** Input zero_data */
                zero_data?: (boolean|null);

                /** Input random_data */
                random_data?: (boolean|null);

                /** Input input_data_file */
                input_data_file?: (string|null);

                /** Input input_data_type */
                input_data_type?: ("zero_data"|"random_data"|"input_data_file");

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Narrowed shape of an Input. */
            type $Shape = {
              data_type?: inference.DataType|null;
              dims?: (number|Long)[]|null;
              zero_data?: boolean|null;
              random_data?: boolean|null;
              input_data_file?: string|null;
              $unknowns?: Uint8Array[];
            } & (
              ({ input_data_type?: undefined; zero_data?: null; random_data?: null; input_data_file?: null }|{ input_data_type?: "zero_data"; zero_data: boolean; random_data?: null; input_data_file?: null }|{ input_data_type?: "random_data"; zero_data?: null; random_data: boolean; input_data_file?: null }|{ input_data_type?: "input_data_file"; zero_data?: null; random_data?: null; input_data_file: string })
            );
        }
    }

    /**
     * Properties of a ModelOperations.
     * @deprecated Use inference.ModelOperations.$Properties instead.
     */
    interface IModelOperations extends inference.ModelOperations.$Properties {
    }

    /** Represents a ModelOperations. */
    class ModelOperations {

        /**
         * Constructs a new ModelOperations.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelOperations.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelOperations op_library_filename. */
        op_library_filename: string[];

        /**
         * Creates a new ModelOperations instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelOperations instance
         */
        static create(properties: inference.ModelOperations.$Shape): inference.ModelOperations & inference.ModelOperations.$Shape;
        static create(properties?: inference.ModelOperations.$Properties): inference.ModelOperations;

        /**
         * Encodes the specified ModelOperations message. Does not implicitly {@link inference.ModelOperations.verify|verify} messages.
         * @param message ModelOperations message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelOperations.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelOperations message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelOperations & inference.ModelOperations.$Shape} ModelOperations
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelOperations & inference.ModelOperations.$Shape;

        /**
         * Creates a ModelOperations message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelOperations
         */
        static fromObject(object: { [k: string]: any }): inference.ModelOperations;

        /**
         * Creates a plain object from a ModelOperations message. Also converts values to other types if specified.
         * @param message ModelOperations
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelOperations, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelOperations to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelOperations {

        /** Properties of a ModelOperations. */
        interface $Properties {

            /** ModelOperations op_library_filename */
            op_library_filename?: (string[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelOperations. */
        type $Shape = inference.ModelOperations.$Properties;
    }

    /**
     * Properties of a ModelTransactionPolicy.
     * @deprecated Use inference.ModelTransactionPolicy.$Properties instead.
     */
    interface IModelTransactionPolicy extends inference.ModelTransactionPolicy.$Properties {
    }

    /** Represents a ModelTransactionPolicy. */
    class ModelTransactionPolicy {

        /**
         * Constructs a new ModelTransactionPolicy.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelTransactionPolicy.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelTransactionPolicy decoupled. */
        decoupled: boolean;

        /**
         * Creates a new ModelTransactionPolicy instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelTransactionPolicy instance
         */
        static create(properties: inference.ModelTransactionPolicy.$Shape): inference.ModelTransactionPolicy & inference.ModelTransactionPolicy.$Shape;
        static create(properties?: inference.ModelTransactionPolicy.$Properties): inference.ModelTransactionPolicy;

        /**
         * Encodes the specified ModelTransactionPolicy message. Does not implicitly {@link inference.ModelTransactionPolicy.verify|verify} messages.
         * @param message ModelTransactionPolicy message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelTransactionPolicy.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelTransactionPolicy message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelTransactionPolicy & inference.ModelTransactionPolicy.$Shape} ModelTransactionPolicy
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelTransactionPolicy & inference.ModelTransactionPolicy.$Shape;

        /**
         * Creates a ModelTransactionPolicy message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelTransactionPolicy
         */
        static fromObject(object: { [k: string]: any }): inference.ModelTransactionPolicy;

        /**
         * Creates a plain object from a ModelTransactionPolicy message. Also converts values to other types if specified.
         * @param message ModelTransactionPolicy
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelTransactionPolicy, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelTransactionPolicy to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelTransactionPolicy {

        /** Properties of a ModelTransactionPolicy. */
        interface $Properties {

            /** ModelTransactionPolicy decoupled */
            decoupled?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelTransactionPolicy. */
        type $Shape = inference.ModelTransactionPolicy.$Properties;
    }

    /**
     * Properties of a ModelRepositoryAgents.
     * @deprecated Use inference.ModelRepositoryAgents.$Properties instead.
     */
    interface IModelRepositoryAgents extends inference.ModelRepositoryAgents.$Properties {
    }

    /** Represents a ModelRepositoryAgents. */
    class ModelRepositoryAgents {

        /**
         * Constructs a new ModelRepositoryAgents.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelRepositoryAgents.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelRepositoryAgents agents. */
        agents: inference.ModelRepositoryAgents.Agent.$Properties[];

        /**
         * Creates a new ModelRepositoryAgents instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelRepositoryAgents instance
         */
        static create(properties: inference.ModelRepositoryAgents.$Shape): inference.ModelRepositoryAgents & inference.ModelRepositoryAgents.$Shape;
        static create(properties?: inference.ModelRepositoryAgents.$Properties): inference.ModelRepositoryAgents;

        /**
         * Encodes the specified ModelRepositoryAgents message. Does not implicitly {@link inference.ModelRepositoryAgents.verify|verify} messages.
         * @param message ModelRepositoryAgents message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelRepositoryAgents.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelRepositoryAgents message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelRepositoryAgents & inference.ModelRepositoryAgents.$Shape} ModelRepositoryAgents
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelRepositoryAgents & inference.ModelRepositoryAgents.$Shape;

        /**
         * Creates a ModelRepositoryAgents message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelRepositoryAgents
         */
        static fromObject(object: { [k: string]: any }): inference.ModelRepositoryAgents;

        /**
         * Creates a plain object from a ModelRepositoryAgents message. Also converts values to other types if specified.
         * @param message ModelRepositoryAgents
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelRepositoryAgents, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelRepositoryAgents to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelRepositoryAgents {

        /** Properties of a ModelRepositoryAgents. */
        interface $Properties {

            /** ModelRepositoryAgents agents */
            agents?: (inference.ModelRepositoryAgents.Agent.$Properties[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelRepositoryAgents. */
        type $Shape = inference.ModelRepositoryAgents.$Properties;

        /**
         * Properties of an Agent.
         * @deprecated Use inference.ModelRepositoryAgents.Agent.$Properties instead.
         */
        interface IAgent extends inference.ModelRepositoryAgents.Agent.$Properties {
        }

        /** Represents an Agent. */
        class Agent {

            /**
             * Constructs a new Agent.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelRepositoryAgents.Agent.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** Agent name. */
            name: string;

            /** Agent parameters. */
            parameters: { [k: string]: string };

            /**
             * Creates a new Agent instance using the specified properties.
             * @param [properties] Properties to set
             * @returns Agent instance
             */
            static create(properties: inference.ModelRepositoryAgents.Agent.$Shape): inference.ModelRepositoryAgents.Agent & inference.ModelRepositoryAgents.Agent.$Shape;
            static create(properties?: inference.ModelRepositoryAgents.Agent.$Properties): inference.ModelRepositoryAgents.Agent;

            /**
             * Encodes the specified Agent message. Does not implicitly {@link inference.ModelRepositoryAgents.Agent.verify|verify} messages.
             * @param message Agent message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelRepositoryAgents.Agent.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes an Agent message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelRepositoryAgents.Agent & inference.ModelRepositoryAgents.Agent.$Shape} Agent
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelRepositoryAgents.Agent & inference.ModelRepositoryAgents.Agent.$Shape;

            /**
             * Creates an Agent message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns Agent
             */
            static fromObject(object: { [k: string]: any }): inference.ModelRepositoryAgents.Agent;

            /**
             * Creates a plain object from an Agent message. Also converts values to other types if specified.
             * @param message Agent
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelRepositoryAgents.Agent, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this Agent to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace Agent {

            /** Properties of an Agent. */
            interface $Properties {

                /** Agent name */
                name?: (string|null);

                /** Agent parameters */
                parameters?: ({ [k: string]: string }|null);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Shape of an Agent. */
            type $Shape = inference.ModelRepositoryAgents.Agent.$Properties;
        }
    }

    /**
     * Properties of a ModelResponseCache.
     * @deprecated Use inference.ModelResponseCache.$Properties instead.
     */
    interface IModelResponseCache extends inference.ModelResponseCache.$Properties {
    }

    /** Represents a ModelResponseCache. */
    class ModelResponseCache {

        /**
         * Constructs a new ModelResponseCache.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelResponseCache.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelResponseCache enable. */
        enable: boolean;

        /**
         * Creates a new ModelResponseCache instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelResponseCache instance
         */
        static create(properties: inference.ModelResponseCache.$Shape): inference.ModelResponseCache & inference.ModelResponseCache.$Shape;
        static create(properties?: inference.ModelResponseCache.$Properties): inference.ModelResponseCache;

        /**
         * Encodes the specified ModelResponseCache message. Does not implicitly {@link inference.ModelResponseCache.verify|verify} messages.
         * @param message ModelResponseCache message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelResponseCache.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelResponseCache message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelResponseCache & inference.ModelResponseCache.$Shape} ModelResponseCache
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelResponseCache & inference.ModelResponseCache.$Shape;

        /**
         * Creates a ModelResponseCache message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelResponseCache
         */
        static fromObject(object: { [k: string]: any }): inference.ModelResponseCache;

        /**
         * Creates a plain object from a ModelResponseCache message. Also converts values to other types if specified.
         * @param message ModelResponseCache
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelResponseCache, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelResponseCache to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelResponseCache {

        /** Properties of a ModelResponseCache. */
        interface $Properties {

            /** ModelResponseCache enable */
            enable?: (boolean|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelResponseCache. */
        type $Shape = inference.ModelResponseCache.$Properties;
    }

    /**
     * Properties of a ModelMetrics.
     * @deprecated Use inference.ModelMetrics.$Properties instead.
     */
    interface IModelMetrics extends inference.ModelMetrics.$Properties {
    }

    /** Represents a ModelMetrics. */
    class ModelMetrics {

        /**
         * Constructs a new ModelMetrics.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelMetrics.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelMetrics metric_control. */
        metric_control: inference.ModelMetrics.MetricControl.$Properties[];

        /**
         * Creates a new ModelMetrics instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelMetrics instance
         */
        static create(properties: inference.ModelMetrics.$Shape): inference.ModelMetrics & inference.ModelMetrics.$Shape;
        static create(properties?: inference.ModelMetrics.$Properties): inference.ModelMetrics;

        /**
         * Encodes the specified ModelMetrics message. Does not implicitly {@link inference.ModelMetrics.verify|verify} messages.
         * @param message ModelMetrics message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelMetrics.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelMetrics message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelMetrics & inference.ModelMetrics.$Shape} ModelMetrics
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelMetrics & inference.ModelMetrics.$Shape;

        /**
         * Creates a ModelMetrics message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelMetrics
         */
        static fromObject(object: { [k: string]: any }): inference.ModelMetrics;

        /**
         * Creates a plain object from a ModelMetrics message. Also converts values to other types if specified.
         * @param message ModelMetrics
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelMetrics, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelMetrics to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelMetrics {

        /** Properties of a ModelMetrics. */
        interface $Properties {

            /** ModelMetrics metric_control */
            metric_control?: (inference.ModelMetrics.MetricControl.$Properties[]|null);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Shape of a ModelMetrics. */
        type $Shape = {
          metric_control?: inference.ModelMetrics.MetricControl.$Shape[]|null;
          $unknowns?: Uint8Array[];
        };

        /**
         * Properties of a MetricControl.
         * @deprecated Use inference.ModelMetrics.MetricControl.$Properties instead.
         */
        interface IMetricControl extends inference.ModelMetrics.MetricControl.$Properties {
        }

        /** Represents a MetricControl. */
        class MetricControl {

            /**
             * Constructs a new MetricControl.
             * @param [properties] Properties to set
             */
            constructor(properties?: inference.ModelMetrics.MetricControl.$Properties);

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];

            /** MetricControl metric_identifier. */
            metric_identifier?: (inference.ModelMetrics.MetricControl.MetricIdentifier.$Properties|null);

            /** MetricControl histogram_options. */
            histogram_options?: (inference.ModelMetrics.MetricControl.HistogramOptions.$Properties|null);

            /** MetricControl metric_options. */
            metric_options?: "histogram_options";

            /**
             * Creates a new MetricControl instance using the specified properties.
             * @param [properties] Properties to set
             * @returns MetricControl instance
             */
            static create(properties: inference.ModelMetrics.MetricControl.$Shape): inference.ModelMetrics.MetricControl & inference.ModelMetrics.MetricControl.$Shape;
            static create(properties?: inference.ModelMetrics.MetricControl.$Properties): inference.ModelMetrics.MetricControl;

            /**
             * Encodes the specified MetricControl message. Does not implicitly {@link inference.ModelMetrics.MetricControl.verify|verify} messages.
             * @param message MetricControl message or plain object to encode
             * @param [writer] Writer to encode to
             * @returns Writer
             */
            static encode(message: inference.ModelMetrics.MetricControl.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

            /**
             * Decodes a MetricControl message from the specified reader or buffer.
             * @param reader Reader or buffer to decode from
             * @param [length] Message length if known beforehand
             * @returns {inference.ModelMetrics.MetricControl & inference.ModelMetrics.MetricControl.$Shape} MetricControl
             * @throws {Error} If the payload is not a reader or valid buffer
             * @throws {$protobuf.util.ProtocolError} If required fields are missing
             */
            static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelMetrics.MetricControl & inference.ModelMetrics.MetricControl.$Shape;

            /**
             * Creates a MetricControl message from a plain object. Also converts values to their respective internal types.
             * @param object Plain object
             * @returns MetricControl
             */
            static fromObject(object: { [k: string]: any }): inference.ModelMetrics.MetricControl;

            /**
             * Creates a plain object from a MetricControl message. Also converts values to other types if specified.
             * @param message MetricControl
             * @param [options] Conversion options
             * @returns Plain object
             */
            static toObject(message: inference.ModelMetrics.MetricControl, options?: $protobuf.IConversionOptions): { [k: string]: any };

            /**
             * Converts this MetricControl to JSON.
             * @returns JSON object
             */
            toJSON(): { [k: string]: any };
        }

        namespace MetricControl {

            /** Properties of a MetricControl. */
            interface $Properties {

                /** MetricControl metric_identifier */
                metric_identifier?: (inference.ModelMetrics.MetricControl.MetricIdentifier.$Properties|null);

                /** MetricControl histogram_options */
                histogram_options?: (inference.ModelMetrics.MetricControl.HistogramOptions.$Properties|null);

                /** MetricControl metric_options */
                metric_options?: "histogram_options";

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];
            }

            /** Narrowed shape of a MetricControl. */
            type $Shape = {
              metric_identifier?: inference.ModelMetrics.MetricControl.MetricIdentifier.$Shape|null;
              histogram_options?: inference.ModelMetrics.MetricControl.HistogramOptions.$Shape|null;
              $unknowns?: Uint8Array[];
            } & (
              ({ metric_options?: undefined; histogram_options?: null }|{ metric_options?: "histogram_options"; histogram_options: inference.ModelMetrics.MetricControl.HistogramOptions.$Shape })
            );

            /**
             * Properties of a MetricIdentifier.
             * @deprecated Use inference.ModelMetrics.MetricControl.MetricIdentifier.$Properties instead.
             */
            interface IMetricIdentifier extends inference.ModelMetrics.MetricControl.MetricIdentifier.$Properties {
            }

            /** Represents a MetricIdentifier. */
            class MetricIdentifier {

                /**
                 * Constructs a new MetricIdentifier.
                 * @param [properties] Properties to set
                 */
                constructor(properties?: inference.ModelMetrics.MetricControl.MetricIdentifier.$Properties);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];

                /** MetricIdentifier family. */
                family: string;

                /**
                 * Creates a new MetricIdentifier instance using the specified properties.
                 * @param [properties] Properties to set
                 * @returns MetricIdentifier instance
                 */
                static create(properties: inference.ModelMetrics.MetricControl.MetricIdentifier.$Shape): inference.ModelMetrics.MetricControl.MetricIdentifier & inference.ModelMetrics.MetricControl.MetricIdentifier.$Shape;
                static create(properties?: inference.ModelMetrics.MetricControl.MetricIdentifier.$Properties): inference.ModelMetrics.MetricControl.MetricIdentifier;

                /**
                 * Encodes the specified MetricIdentifier message. Does not implicitly {@link inference.ModelMetrics.MetricControl.MetricIdentifier.verify|verify} messages.
                 * @param message MetricIdentifier message or plain object to encode
                 * @param [writer] Writer to encode to
                 * @returns Writer
                 */
                static encode(message: inference.ModelMetrics.MetricControl.MetricIdentifier.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

                /**
                 * Decodes a MetricIdentifier message from the specified reader or buffer.
                 * @param reader Reader or buffer to decode from
                 * @param [length] Message length if known beforehand
                 * @returns {inference.ModelMetrics.MetricControl.MetricIdentifier & inference.ModelMetrics.MetricControl.MetricIdentifier.$Shape} MetricIdentifier
                 * @throws {Error} If the payload is not a reader or valid buffer
                 * @throws {$protobuf.util.ProtocolError} If required fields are missing
                 */
                static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelMetrics.MetricControl.MetricIdentifier & inference.ModelMetrics.MetricControl.MetricIdentifier.$Shape;

                /**
                 * Creates a MetricIdentifier message from a plain object. Also converts values to their respective internal types.
                 * @param object Plain object
                 * @returns MetricIdentifier
                 */
                static fromObject(object: { [k: string]: any }): inference.ModelMetrics.MetricControl.MetricIdentifier;

                /**
                 * Creates a plain object from a MetricIdentifier message. Also converts values to other types if specified.
                 * @param message MetricIdentifier
                 * @param [options] Conversion options
                 * @returns Plain object
                 */
                static toObject(message: inference.ModelMetrics.MetricControl.MetricIdentifier, options?: $protobuf.IConversionOptions): { [k: string]: any };

                /**
                 * Converts this MetricIdentifier to JSON.
                 * @returns JSON object
                 */
                toJSON(): { [k: string]: any };
            }

            namespace MetricIdentifier {

                /** Properties of a MetricIdentifier. */
                interface $Properties {

                    /** MetricIdentifier family */
                    family?: (string|null);

                    /** Unknown fields preserved while decoding when enabled */
                    $unknowns?: Uint8Array[];
                }

                /** Shape of a MetricIdentifier. */
                type $Shape = inference.ModelMetrics.MetricControl.MetricIdentifier.$Properties;
            }

            /**
             * Properties of a HistogramOptions.
             * @deprecated Use inference.ModelMetrics.MetricControl.HistogramOptions.$Properties instead.
             */
            interface IHistogramOptions extends inference.ModelMetrics.MetricControl.HistogramOptions.$Properties {
            }

            /** Represents a HistogramOptions. */
            class HistogramOptions {

                /**
                 * Constructs a new HistogramOptions.
                 * @param [properties] Properties to set
                 */
                constructor(properties?: inference.ModelMetrics.MetricControl.HistogramOptions.$Properties);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];

                /** HistogramOptions buckets. */
                buckets: number[];

                /**
                 * Creates a new HistogramOptions instance using the specified properties.
                 * @param [properties] Properties to set
                 * @returns HistogramOptions instance
                 */
                static create(properties: inference.ModelMetrics.MetricControl.HistogramOptions.$Shape): inference.ModelMetrics.MetricControl.HistogramOptions & inference.ModelMetrics.MetricControl.HistogramOptions.$Shape;
                static create(properties?: inference.ModelMetrics.MetricControl.HistogramOptions.$Properties): inference.ModelMetrics.MetricControl.HistogramOptions;

                /**
                 * Encodes the specified HistogramOptions message. Does not implicitly {@link inference.ModelMetrics.MetricControl.HistogramOptions.verify|verify} messages.
                 * @param message HistogramOptions message or plain object to encode
                 * @param [writer] Writer to encode to
                 * @returns Writer
                 */
                static encode(message: inference.ModelMetrics.MetricControl.HistogramOptions.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

                /**
                 * Decodes a HistogramOptions message from the specified reader or buffer.
                 * @param reader Reader or buffer to decode from
                 * @param [length] Message length if known beforehand
                 * @returns {inference.ModelMetrics.MetricControl.HistogramOptions & inference.ModelMetrics.MetricControl.HistogramOptions.$Shape} HistogramOptions
                 * @throws {Error} If the payload is not a reader or valid buffer
                 * @throws {$protobuf.util.ProtocolError} If required fields are missing
                 */
                static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelMetrics.MetricControl.HistogramOptions & inference.ModelMetrics.MetricControl.HistogramOptions.$Shape;

                /**
                 * Creates a HistogramOptions message from a plain object. Also converts values to their respective internal types.
                 * @param object Plain object
                 * @returns HistogramOptions
                 */
                static fromObject(object: { [k: string]: any }): inference.ModelMetrics.MetricControl.HistogramOptions;

                /**
                 * Creates a plain object from a HistogramOptions message. Also converts values to other types if specified.
                 * @param message HistogramOptions
                 * @param [options] Conversion options
                 * @returns Plain object
                 */
                static toObject(message: inference.ModelMetrics.MetricControl.HistogramOptions, options?: $protobuf.IConversionOptions): { [k: string]: any };

                /**
                 * Converts this HistogramOptions to JSON.
                 * @returns JSON object
                 */
                toJSON(): { [k: string]: any };
            }

            namespace HistogramOptions {

                /** Properties of a HistogramOptions. */
                interface $Properties {

                    /** HistogramOptions buckets */
                    buckets?: (number[]|null);

                    /** Unknown fields preserved while decoding when enabled */
                    $unknowns?: Uint8Array[];
                }

                /** Shape of a HistogramOptions. */
                type $Shape = inference.ModelMetrics.MetricControl.HistogramOptions.$Properties;
            }
        }
    }

    /**
     * Properties of a ModelConfig.
     * @deprecated Use inference.ModelConfig.$Properties instead.
     */
    interface IModelConfig extends inference.ModelConfig.$Properties {
    }

    /** Represents a ModelConfig. */
    class ModelConfig {

        /**
         * Constructs a new ModelConfig.
         * @param [properties] Properties to set
         */
        constructor(properties?: inference.ModelConfig.$Properties);

        /** Unknown fields preserved while decoding when enabled */
        $unknowns?: Uint8Array[];

        /** ModelConfig name. */
        name: string;

        /** ModelConfig platform. */
        platform: string;

        /** ModelConfig backend. */
        backend: string;

        /** ModelConfig runtime. */
        runtime: string;

        /** ModelConfig version_policy. */
        version_policy?: (inference.ModelVersionPolicy.$Properties|null);

        /** ModelConfig max_batch_size. */
        max_batch_size: number;

        /** ModelConfig input. */
        input: inference.ModelInput.$Properties[];

        /** ModelConfig output. */
        output: inference.ModelOutput.$Properties[];

        /** ModelConfig batch_input. */
        batch_input: inference.BatchInput.$Properties[];

        /** ModelConfig batch_output. */
        batch_output: inference.BatchOutput.$Properties[];

        /** ModelConfig optimization. */
        optimization?: (inference.ModelOptimizationPolicy.$Properties|null);

        /** ModelConfig dynamic_batching. */
        dynamic_batching?: (inference.ModelDynamicBatching.$Properties|null);

        /** ModelConfig sequence_batching. */
        sequence_batching?: (inference.ModelSequenceBatching.$Properties|null);

        /** ModelConfig ensemble_scheduling. */
        ensemble_scheduling?: (inference.ModelEnsembling.$Properties|null);

        /** ModelConfig instance_group. */
        instance_group: inference.ModelInstanceGroup.$Properties[];

        /** ModelConfig default_model_filename. */
        default_model_filename: string;

        /** ModelConfig cc_model_filenames. */
        cc_model_filenames: { [k: string]: string };

        /** ModelConfig metric_tags. */
        metric_tags: { [k: string]: string };

        /** ModelConfig parameters. */
        parameters: { [k: string]: inference.ModelParameter.$Properties };

        /** ModelConfig model_warmup. */
        model_warmup: inference.ModelWarmup.$Properties[];

        /** ModelConfig model_operations. */
        model_operations?: (inference.ModelOperations.$Properties|null);

        /** ModelConfig model_transaction_policy. */
        model_transaction_policy?: (inference.ModelTransactionPolicy.$Properties|null);

        /** ModelConfig model_repository_agents. */
        model_repository_agents?: (inference.ModelRepositoryAgents.$Properties|null);

        /** ModelConfig response_cache. */
        response_cache?: (inference.ModelResponseCache.$Properties|null);

        /** ModelConfig model_metrics. */
        model_metrics?: (inference.ModelMetrics.$Properties|null);

        /** ModelConfig scheduling_choice. */
        scheduling_choice?: ("dynamic_batching"|"sequence_batching"|"ensemble_scheduling");

        /**
         * Creates a new ModelConfig instance using the specified properties.
         * @param [properties] Properties to set
         * @returns ModelConfig instance
         */
        static create(properties: inference.ModelConfig.$Shape): inference.ModelConfig & inference.ModelConfig.$Shape;
        static create(properties?: inference.ModelConfig.$Properties): inference.ModelConfig;

        /**
         * Encodes the specified ModelConfig message. Does not implicitly {@link inference.ModelConfig.verify|verify} messages.
         * @param message ModelConfig message or plain object to encode
         * @param [writer] Writer to encode to
         * @returns Writer
         */
        static encode(message: inference.ModelConfig.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

        /**
         * Decodes a ModelConfig message from the specified reader or buffer.
         * @param reader Reader or buffer to decode from
         * @param [length] Message length if known beforehand
         * @returns {inference.ModelConfig & inference.ModelConfig.$Shape} ModelConfig
         * @throws {Error} If the payload is not a reader or valid buffer
         * @throws {$protobuf.util.ProtocolError} If required fields are missing
         */
        static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): inference.ModelConfig & inference.ModelConfig.$Shape;

        /**
         * Creates a ModelConfig message from a plain object. Also converts values to their respective internal types.
         * @param object Plain object
         * @returns ModelConfig
         */
        static fromObject(object: { [k: string]: any }): inference.ModelConfig;

        /**
         * Creates a plain object from a ModelConfig message. Also converts values to other types if specified.
         * @param message ModelConfig
         * @param [options] Conversion options
         * @returns Plain object
         */
        static toObject(message: inference.ModelConfig, options?: $protobuf.IConversionOptions): { [k: string]: any };

        /**
         * Converts this ModelConfig to JSON.
         * @returns JSON object
         */
        toJSON(): { [k: string]: any };
    }

    namespace ModelConfig {

        /** Properties of a ModelConfig. */
        interface $Properties {

            /** ModelConfig name */
            name?: (string|null);

            /** ModelConfig platform */
            platform?: (string|null);

            /** ModelConfig backend */
            backend?: (string|null);

            /** ModelConfig runtime */
            runtime?: (string|null);

            /** ModelConfig version_policy */
            version_policy?: (inference.ModelVersionPolicy.$Properties|null);

            /** ModelConfig max_batch_size */
            max_batch_size?: (number|null);

            /** ModelConfig input */
            input?: (inference.ModelInput.$Properties[]|null);

            /** ModelConfig output */
            output?: (inference.ModelOutput.$Properties[]|null);

            /** ModelConfig batch_input */
            batch_input?: (inference.BatchInput.$Properties[]|null);

            /** ModelConfig batch_output */
            batch_output?: (inference.BatchOutput.$Properties[]|null);

            /** ModelConfig optimization */
            optimization?: (inference.ModelOptimizationPolicy.$Properties|null);

            /** ModelConfig dynamic_batching */
            dynamic_batching?: (inference.ModelDynamicBatching.$Properties|null);

            /** ModelConfig sequence_batching */
            sequence_batching?: (inference.ModelSequenceBatching.$Properties|null);

            /** ModelConfig ensemble_scheduling */
            ensemble_scheduling?: (inference.ModelEnsembling.$Properties|null);

            /** ModelConfig instance_group */
            instance_group?: (inference.ModelInstanceGroup.$Properties[]|null);

            /** ModelConfig default_model_filename */
            default_model_filename?: (string|null);

            /** ModelConfig cc_model_filenames */
            cc_model_filenames?: ({ [k: string]: string }|null);

            /** ModelConfig metric_tags */
            metric_tags?: ({ [k: string]: string }|null);

            /** ModelConfig parameters */
            parameters?: ({ [k: string]: inference.ModelParameter.$Properties }|null);

            /** ModelConfig model_warmup */
            model_warmup?: (inference.ModelWarmup.$Properties[]|null);

            /** ModelConfig model_operations */
            model_operations?: (inference.ModelOperations.$Properties|null);

            /** ModelConfig model_transaction_policy */
            model_transaction_policy?: (inference.ModelTransactionPolicy.$Properties|null);

            /** ModelConfig model_repository_agents */
            model_repository_agents?: (inference.ModelRepositoryAgents.$Properties|null);

            /** ModelConfig response_cache */
            response_cache?: (inference.ModelResponseCache.$Properties|null);

            /** ModelConfig model_metrics */
            model_metrics?: (inference.ModelMetrics.$Properties|null);

            /** ModelConfig scheduling_choice */
            scheduling_choice?: ("dynamic_batching"|"sequence_batching"|"ensemble_scheduling");

            /** Unknown fields preserved while decoding when enabled */
            $unknowns?: Uint8Array[];
        }

        /** Narrowed shape of a ModelConfig. */
        type $Shape = {
          name?: string|null;
          platform?: string|null;
          backend?: string|null;
          runtime?: string|null;
          version_policy?: inference.ModelVersionPolicy.$Shape|null;
          max_batch_size?: number|null;
          input?: inference.ModelInput.$Shape[]|null;
          output?: inference.ModelOutput.$Shape[]|null;
          batch_input?: inference.BatchInput.$Shape[]|null;
          batch_output?: inference.BatchOutput.$Shape[]|null;
          optimization?: inference.ModelOptimizationPolicy.$Shape|null;
          dynamic_batching?: inference.ModelDynamicBatching.$Shape|null;
          sequence_batching?: inference.ModelSequenceBatching.$Shape|null;
          ensemble_scheduling?: inference.ModelEnsembling.$Shape|null;
          instance_group?: inference.ModelInstanceGroup.$Shape[]|null;
          default_model_filename?: string|null;
          cc_model_filenames?: { [k: string]: string }|null;
          metric_tags?: { [k: string]: string }|null;
          parameters?: { [k: string]: inference.ModelParameter.$Shape }|null;
          model_warmup?: inference.ModelWarmup.$Shape[]|null;
          model_operations?: inference.ModelOperations.$Shape|null;
          model_transaction_policy?: inference.ModelTransactionPolicy.$Shape|null;
          model_repository_agents?: inference.ModelRepositoryAgents.$Shape|null;
          response_cache?: inference.ModelResponseCache.$Shape|null;
          model_metrics?: inference.ModelMetrics.$Shape|null;
          $unknowns?: Uint8Array[];
        } & (
          ({ scheduling_choice?: undefined; dynamic_batching?: null; sequence_batching?: null; ensemble_scheduling?: null }|{ scheduling_choice?: "dynamic_batching"; dynamic_batching: inference.ModelDynamicBatching.$Shape; sequence_batching?: null; ensemble_scheduling?: null }|{ scheduling_choice?: "sequence_batching"; dynamic_batching?: null; sequence_batching: inference.ModelSequenceBatching.$Shape; ensemble_scheduling?: null }|{ scheduling_choice?: "ensemble_scheduling"; dynamic_batching?: null; sequence_batching?: null; ensemble_scheduling: inference.ModelEnsembling.$Shape })
        );
    }
}

/** Namespace grpc. */
export namespace grpc {

    /** Namespace health. */
    namespace health {

        /** Namespace v1. */
        namespace v1 {

            /**
             * Properties of a HealthCheckRequest.
             * @deprecated Use grpc.health.v1.HealthCheckRequest.$Properties instead.
             */
            interface IHealthCheckRequest extends grpc.health.v1.HealthCheckRequest.$Properties {
            }

            /** Represents a HealthCheckRequest. */
            class HealthCheckRequest {

                /**
                 * Constructs a new HealthCheckRequest.
                 * @param [properties] Properties to set
                 */
                constructor(properties?: grpc.health.v1.HealthCheckRequest.$Properties);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];

                /** HealthCheckRequest service. */
                service: string;

                /**
                 * Creates a new HealthCheckRequest instance using the specified properties.
                 * @param [properties] Properties to set
                 * @returns HealthCheckRequest instance
                 */
                static create(properties: grpc.health.v1.HealthCheckRequest.$Shape): grpc.health.v1.HealthCheckRequest & grpc.health.v1.HealthCheckRequest.$Shape;
                static create(properties?: grpc.health.v1.HealthCheckRequest.$Properties): grpc.health.v1.HealthCheckRequest;

                /**
                 * Encodes the specified HealthCheckRequest message. Does not implicitly {@link grpc.health.v1.HealthCheckRequest.verify|verify} messages.
                 * @param message HealthCheckRequest message or plain object to encode
                 * @param [writer] Writer to encode to
                 * @returns Writer
                 */
                static encode(message: grpc.health.v1.HealthCheckRequest.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

                /**
                 * Decodes a HealthCheckRequest message from the specified reader or buffer.
                 * @param reader Reader or buffer to decode from
                 * @param [length] Message length if known beforehand
                 * @returns {grpc.health.v1.HealthCheckRequest & grpc.health.v1.HealthCheckRequest.$Shape} HealthCheckRequest
                 * @throws {Error} If the payload is not a reader or valid buffer
                 * @throws {$protobuf.util.ProtocolError} If required fields are missing
                 */
                static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): grpc.health.v1.HealthCheckRequest & grpc.health.v1.HealthCheckRequest.$Shape;

                /**
                 * Creates a HealthCheckRequest message from a plain object. Also converts values to their respective internal types.
                 * @param object Plain object
                 * @returns HealthCheckRequest
                 */
                static fromObject(object: { [k: string]: any }): grpc.health.v1.HealthCheckRequest;

                /**
                 * Creates a plain object from a HealthCheckRequest message. Also converts values to other types if specified.
                 * @param message HealthCheckRequest
                 * @param [options] Conversion options
                 * @returns Plain object
                 */
                static toObject(message: grpc.health.v1.HealthCheckRequest, options?: $protobuf.IConversionOptions): { [k: string]: any };

                /**
                 * Converts this HealthCheckRequest to JSON.
                 * @returns JSON object
                 */
                toJSON(): { [k: string]: any };
            }

            namespace HealthCheckRequest {

                /** Properties of a HealthCheckRequest. */
                interface $Properties {

                    /** HealthCheckRequest service */
                    service?: (string|null);

                    /** Unknown fields preserved while decoding when enabled */
                    $unknowns?: Uint8Array[];
                }

                /** Shape of a HealthCheckRequest. */
                type $Shape = grpc.health.v1.HealthCheckRequest.$Properties;
            }

            /**
             * Properties of a HealthCheckResponse.
             * @deprecated Use grpc.health.v1.HealthCheckResponse.$Properties instead.
             */
            interface IHealthCheckResponse extends grpc.health.v1.HealthCheckResponse.$Properties {
            }

            /** Represents a HealthCheckResponse. */
            class HealthCheckResponse {

                /**
                 * Constructs a new HealthCheckResponse.
                 * @param [properties] Properties to set
                 */
                constructor(properties?: grpc.health.v1.HealthCheckResponse.$Properties);

                /** Unknown fields preserved while decoding when enabled */
                $unknowns?: Uint8Array[];

                /** HealthCheckResponse status. */
                status: grpc.health.v1.HealthCheckResponse.ServingStatus;

                /**
                 * Creates a new HealthCheckResponse instance using the specified properties.
                 * @param [properties] Properties to set
                 * @returns HealthCheckResponse instance
                 */
                static create(properties: grpc.health.v1.HealthCheckResponse.$Shape): grpc.health.v1.HealthCheckResponse & grpc.health.v1.HealthCheckResponse.$Shape;
                static create(properties?: grpc.health.v1.HealthCheckResponse.$Properties): grpc.health.v1.HealthCheckResponse;

                /**
                 * Encodes the specified HealthCheckResponse message. Does not implicitly {@link grpc.health.v1.HealthCheckResponse.verify|verify} messages.
                 * @param message HealthCheckResponse message or plain object to encode
                 * @param [writer] Writer to encode to
                 * @returns Writer
                 */
                static encode(message: grpc.health.v1.HealthCheckResponse.$Properties, writer?: $protobuf.Writer): $protobuf.Writer;

                /**
                 * Decodes a HealthCheckResponse message from the specified reader or buffer.
                 * @param reader Reader or buffer to decode from
                 * @param [length] Message length if known beforehand
                 * @returns {grpc.health.v1.HealthCheckResponse & grpc.health.v1.HealthCheckResponse.$Shape} HealthCheckResponse
                 * @throws {Error} If the payload is not a reader or valid buffer
                 * @throws {$protobuf.util.ProtocolError} If required fields are missing
                 */
                static decode(reader: ($protobuf.Reader|Uint8Array), length?: number): grpc.health.v1.HealthCheckResponse & grpc.health.v1.HealthCheckResponse.$Shape;

                /**
                 * Creates a HealthCheckResponse message from a plain object. Also converts values to their respective internal types.
                 * @param object Plain object
                 * @returns HealthCheckResponse
                 */
                static fromObject(object: { [k: string]: any }): grpc.health.v1.HealthCheckResponse;

                /**
                 * Creates a plain object from a HealthCheckResponse message. Also converts values to other types if specified.
                 * @param message HealthCheckResponse
                 * @param [options] Conversion options
                 * @returns Plain object
                 */
                static toObject(message: grpc.health.v1.HealthCheckResponse, options?: $protobuf.IConversionOptions): { [k: string]: any };

                /**
                 * Converts this HealthCheckResponse to JSON.
                 * @returns JSON object
                 */
                toJSON(): { [k: string]: any };
            }

            namespace HealthCheckResponse {

                /** Properties of a HealthCheckResponse. */
                interface $Properties {

                    /** HealthCheckResponse status */
                    status?: (grpc.health.v1.HealthCheckResponse.ServingStatus|null);

                    /** Unknown fields preserved while decoding when enabled */
                    $unknowns?: Uint8Array[];
                }

                /** Shape of a HealthCheckResponse. */
                type $Shape = grpc.health.v1.HealthCheckResponse.$Properties;

                /** ServingStatus enum. */
                enum ServingStatus {

                    /** UNKNOWN value */
                    UNKNOWN = 0,

                    /** SERVING value */
                    SERVING = 1,

                    /** NOT_SERVING value */
                    NOT_SERVING = 2,

                    /** SERVICE_UNKNOWN value */
                    SERVICE_UNKNOWN = 3
                }
            }
        }
    }
}
