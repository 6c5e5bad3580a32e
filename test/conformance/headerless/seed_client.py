# The Python example of KServe's binary tensor extension docs (docs/dialects.md), as written there: JSON
# followed by the tensor bytes, no Inference-Header-Content-Length. Adapted only in URL and model
# (classifier_fp32, whose input is INPUT [-1, 3, 224, 224] FP32). Usage: seed_client.py BASE_URL IMAGE_OUT
import sys

import requests
import numpy as np
import json

def send_binary_request(url, tensors):
    """Send inference request with binary tensor data."""
    
    # Prepare JSON metadata
    inputs = []
    binary_data = b""
    
    for name, tensor in tensors.items():
        # Convert to binary
        tensor_bytes = tensor.astype(tensor.dtype).tobytes()
        binary_data += tensor_bytes
        
        # Add metadata
        inputs.append({
            "name": name,
            "shape": list(tensor.shape),
            "datatype": numpy_to_kserve_dtype(tensor.dtype),
            "parameters": {
                "binary_data_size": len(tensor_bytes)
            }
        })
    
    # Create request payload
    json_data = {"inputs": inputs}
    json_bytes = json.dumps(json_data).encode('utf-8')
    
    # Combine JSON + binary data
    payload = json_bytes + binary_data
    
    # Send request
    response = requests.post(
        url,
        data=payload,
        headers={
            "Content-Type": "application/json",
            "Content-Length": str(len(payload))
        }
    )
    
    return response.json()

def numpy_to_kserve_dtype(np_dtype):
    """Convert NumPy dtype to KServe datatype string."""
    mapping = {
        np.float16: "FP16",
        np.float32: "FP32", 
        np.float64: "FP64",
        np.int8: "INT8",
        np.int16: "INT16",
        np.int32: "INT32",
        np.int64: "INT64",
        np.uint8: "UINT8",
        np.uint16: "UINT16",
        np.uint32: "UINT32", 
        np.uint64: "UINT64",
        np.bool_: "BOOL"
    }
    return mapping.get(np_dtype.type, "FP32")

# Example usage
image = np.random.rand(1, 3, 224, 224).astype(np.float32)
tensors = {"INPUT": image}

result = send_binary_request(
    sys.argv[1] + "/v2/models/classifier_fp32/infer",
    tensors
)

# The check (not part of the seed): the answer, and the image's bytes for the caller to verify it.
image.tofile(sys.argv[2])
print(json.dumps(result))
