// The Go example of KServe's binary tensor extension docs (docs/dialects.md): sendBinaryRequest exactly as
// written there (JSON followed by the tensor bytes, no Inference-Header-Content-Length). main is
// ours: it calls it with identity_fp32's INPUT0 and prints the answer, which the seed's function
// drops, by recording it in http.DefaultClient's transport. Usage: go run seed_client.go BASE_URL
package main

import (
    "bytes"
    "encoding/binary"
    "encoding/json"
    "fmt"
    "io"
    "net/http"
    "os"
)

type TensorInput struct {
    Name       string                 `json:"name"`
    Shape      []int                  `json:"shape"`
    Datatype   string                 `json:"datatype"`
    Parameters map[string]interface{} `json:"parameters"`
}

type InferenceRequest struct {
    Inputs []TensorInput `json:"inputs"`
}

func sendBinaryRequest(url string, tensors map[string][]float32, shapes map[string][]int) error {
    var inputs []TensorInput
    var binaryData bytes.Buffer
    
    for name, tensor := range tensors {
        // Convert to binary
        for _, val := range tensor {
            binary.Write(&binaryData, binary.LittleEndian, val)
        }
        
        // Add metadata
        inputs = append(inputs, TensorInput{
            Name:     name,
            Shape:    shapes[name],
            Datatype: "FP32",
            Parameters: map[string]interface{}{
                "binary_data_size": len(tensor) * 4, // 4 bytes per float32
            },
        })
    }
    
    // Create JSON metadata
    request := InferenceRequest{Inputs: inputs}
    jsonData, _ := json.Marshal(request)
    
    // Combine JSON + binary
    var payload bytes.Buffer
    payload.Write(jsonData)
    payload.Write(binaryData.Bytes())
    
    // Send request
    resp, err := http.Post(url, "application/json", &payload)
    if err != nil {
        return err
    }
    defer resp.Body.Close()
    
    // Process response...
    return nil
}

// recorder keeps the status and body of the answer the seed's function does not read.
type recorder struct {
    status int
    body   []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
    resp, err := http.DefaultTransport.RoundTrip(req)
    if err != nil {
        return nil, err
    }
    r.status = resp.StatusCode
    r.body, err = io.ReadAll(resp.Body)
    resp.Body.Close()
    resp.Body = io.NopCloser(bytes.NewReader(r.body))
    return resp, err
}

func main() {
    rec := &recorder{}
    http.DefaultClient.Transport = rec
    tensors := map[string][]float32{"INPUT0": {1.5, -2.25, 3e-8, 1024, 0, 7}}
    shapes := map[string][]int{"INPUT0": {1, 6}}
    if err := sendBinaryRequest(os.Args[1]+"/v2/models/identity_fp32/infer", tensors, shapes); err != nil {
        fmt.Fprintln(os.Stderr, err)
        os.Exit(1)
    }
    fmt.Printf("{\"status\":%d,\"body\":%s}\n", rec.status, rec.body)
}
