// The JavaScript example of KServe's binary tensor extension docs (docs/dialects.md), as written there
// (JSON followed by the tensor bytes, no Inference-Header-Content-Length), run with Node's fetch.
// Adapted only in URL and model (identity_fp32). Usage: node seed_client.mjs BASE_URL
async function sendBinaryRequest(url, tensors) {
    const inputs = [];
    const binaryChunks = [];
    
    for (const [name, tensorData] of Object.entries(tensors)) {
        const { data, shape, dtype } = tensorData;
        
        // Convert to binary
        const buffer = new ArrayBuffer(data.length * 4); // Assuming FP32
        const view = new Float32Array(buffer);
        view.set(data);
        
        binaryChunks.push(buffer);
        
        // Add metadata
        inputs.push({
            name: name,
            shape: shape,
            datatype: "FP32",
            parameters: {
                binary_data_size: buffer.byteLength
            }
        });
    }
    
    // Create request payload
    const jsonData = JSON.stringify({ inputs });
    const jsonBytes = new TextEncoder().encode(jsonData);
    
    // Combine JSON + binary data
    const totalLength = jsonBytes.length + 
        binaryChunks.reduce((sum, chunk) => sum + chunk.byteLength, 0);
    
    const payload = new Uint8Array(totalLength);
    let offset = 0;
    
    // Copy JSON
    payload.set(jsonBytes, offset);
    offset += jsonBytes.length;
    
    // Copy binary data
    for (const chunk of binaryChunks) {
        payload.set(new Uint8Array(chunk), offset);
        offset += chunk.byteLength;
    }
    
    // Send request
    const response = await fetch(url, {
        method: 'POST',
        headers: {
            'Content-Type': 'application/json',
            'Content-Length': payload.length.toString()
        },
        body: payload
    });
    
    return await response.json();
}

const result = await sendBinaryRequest(`${process.argv[2]}/v2/models/identity_fp32/infer`, {
    INPUT0: { data: [1.5, -2.25, 3e-8, 1024, 0, 7], shape: [1, 6], dtype: 'FP32' },
});
console.log(JSON.stringify(result));
