#!/usr/bin/env python3
"""An OTLP receiver for the tracing tests: takes trace (and metric) exports over OTLP/HTTP
(protobuf, POST /v1/traces, /v1/metrics) and OTLP/gRPC (TraceService/Export,
MetricsService/Export), decodes them with opentelemetry-proto, and prints each span as
one JSON line on standard output:

  {"span": {"name": ..., "trace_id": hex, "span_id": hex, "parent_span_id": hex or "",
            "kind": "SPAN_KIND_SERVER", "attributes": {...}, "service": "...", "via": "http"}}

and each metric's name as {"metric": {"name": ..., "service": ..., "via": ...}}. Prints
`READY {"http": PORT, "grpc": PORT}` once both listen, on free ports of 127.0.0.1.

Run it with scripts/deploy-tools.sh python scripts/otlp-receiver.py."""
import http.server
import json
import sys
import threading
from concurrent import futures

import grpc
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2

lock = threading.Lock()


def emit(line):
    with lock:
        sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
        sys.stdout.flush()


def value(attribute):
    """An attribute's value, as JSON: the one field of its AnyValue that is set."""
    data = MessageToDict(attribute.value)
    return next(iter(data.values()), None)


def service_name(resource):
    return next((value(a) for a in resource.attributes if a.key == "service.name"), None)


def print_spans(request, via):
    for resource_spans in request.resource_spans:
        service = service_name(resource_spans.resource)
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                emit({"span": {
                    "name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "kind": trace_pb2.Span.SpanKind.Name(span.kind),
                    "attributes": {a.key: value(a) for a in span.attributes},
                    "status": trace_pb2.Status.StatusCode.Name(span.status.code),
                    "service": service, "via": via,
                }})


def print_metrics(request, via):
    for resource_metrics in request.resource_metrics:
        service = service_name(resource_metrics.resource)
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                emit({"metric": {"name": metric.name, "service": service, "via": via}})


class HTTPReceiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/v1/traces":
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            print_spans(request, "http")
            answer = trace_service_pb2.ExportTraceServiceResponse()
        elif self.path == "/v1/metrics":
            request = metrics_service_pb2.ExportMetricsServiceRequest()
            request.ParseFromString(body)
            print_metrics(request, "http")
            answer = metrics_service_pb2.ExportMetricsServiceResponse()
        else:
            self.send_response(404)
            self.end_headers()
            return
        data = answer.SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *arguments):
        pass


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        print_spans(request, "grpc")
        return trace_service_pb2.ExportTraceServiceResponse()


class MetricsService(metrics_service_pb2_grpc.MetricsServiceServicer):
    def Export(self, request, context):
        print_metrics(request, "grpc")
        return metrics_service_pb2.ExportMetricsServiceResponse()


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HTTPReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), receiver)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(MetricsService(), receiver)
    grpc_port = receiver.add_insecure_port("127.0.0.1:0")
    receiver.start()
    print("READY " + json.dumps({"http": server.server_address[1], "grpc": grpc_port}), flush=True)
    # Until the test closes standard input (or ends the process).
    sys.stdin.read()
    receiver.stop(0)
    server.shutdown()


if __name__ == "__main__":
    main()
