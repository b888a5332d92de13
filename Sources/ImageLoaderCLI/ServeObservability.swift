import CoreMetrics
import Foundation
import Logging
import OTel
import Prometheus
import ServiceLifecycle
import Tracing

/// What `serve` reports to: Prometheus' text at `/metrics` always (its names under
/// `IMGPROXY_PROMETHEUS_NAMESPACE` when set), and OpenTelemetry's traces and metrics
/// over OTLP when imgproxy's variables turn them on (`IMGPROXY_OPEN_TELEMETRY_ENABLE`,
/// `IMGPROXY_OPEN_TELEMETRY_ENABLE_METRICS`). The exporters read OpenTelemetry's own
/// variables: `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL` (`grpc`, as
/// imgproxy's default, or `http/protobuf`), `OTEL_SERVICE_NAME` (`imageloader` unless
/// set), `OTEL_PROPAGATORS` (W3C `traceparent` by default) and the rest of the
/// specification's.
struct ServeObservability {
    let registry: PrometheusCollectorRegistry
    /// The exporters, to run in the service group before the servers (so that they
    /// stop after them, with the last spans sent).
    let services: [any Service]
    let tracesRequests: Bool

    /// Bootstraps swift-metrics (and swift-distributed-tracing when `traces`); once per process.
    static func bootstrap(traces: Bool, metrics: Bool, namespace: String?, environment: [String: String])
        throws -> ServeObservability
    {
        let registry = PrometheusCollectorRegistry()
        var factory: any MetricsFactory = PrometheusMetricsFactory(registry: registry)
        if let namespace { factory = NamespacedMetricsFactory(namespace: namespace, base: factory) }
        var services: [any Service] = []
        if traces || metrics {
            var configuration = OTel.Configuration.default
            configuration.serviceName = "imageloader"
            configuration.logs.enabled = false
            configuration.traces.enabled = traces
            configuration.metrics.enabled = metrics
            // imgproxy's default protocol; OTEL_EXPORTER_OTLP_PROTOCOL (read after) may say otherwise.
            configuration.traces.otlpExporter.protocol = .grpc
            configuration.metrics.otlpExporter.protocol = .grpc
            if traces {
                let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
                InstrumentationSystem.bootstrap(tracer)
                services.append(service)
            }
            if metrics {
                let (otlp, service) = try OTel.makeMetricsBackend(configuration: configuration)
                factory = MultiplexMetricsHandler(factories: [factory, otlp])
                services.append(service)
            }
        }
        MetricsSystem.bootstrap(factory)
        return ServeObservability(registry: registry, services: services, tracesRequests: traces)
    }
}

/// Every metric's label under a namespace (`NAMESPACE_label`), as imgproxy's
/// `IMGPROXY_PROMETHEUS_NAMESPACE` prefixes its metrics.
struct NamespacedMetricsFactory: MetricsFactory {
    let namespace: String
    let base: any MetricsFactory

    private func named(_ label: String) -> String { namespace + "_" + label }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        base.makeCounter(label: named(label), dimensions: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        base.makeFloatingPointCounter(label: named(label), dimensions: dimensions)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        base.makeMeter(label: named(label), dimensions: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        base.makeRecorder(label: named(label), dimensions: dimensions, aggregate: aggregate)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        base.makeTimer(label: named(label), dimensions: dimensions)
    }

    func destroyCounter(_ handler: any CounterHandler) { base.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        base.destroyFloatingPointCounter(handler)
    }
    func destroyMeter(_ handler: any MeterHandler) { base.destroyMeter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { base.destroyRecorder(handler) }
    func destroyTimer(_ handler: any TimerHandler) { base.destroyTimer(handler) }
}
