import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

/** Every Prometheus series the service exports (README, Health and metrics), on a registry of its own per instance. */
export function createMetrics() {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const startedAt = Date.now() / 1_000
  let lastPassAt = 0
  return {
    registry,
    httpRequests: new Counter({
      name: 'rxtrace_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'rxtrace_http_request_duration_seconds',
      help: 'HTTP request latency',
      labelNames: ['method', 'route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    readingsIngested: new Counter({
      name: 'rxtrace_readings_ingested_total',
      help: 'Readings committed to the time series',
      registers: [registry],
    }),
    readingsRejected: new Counter({
      name: 'rxtrace_readings_rejected_total',
      help: 'Telemetry payloads rejected, by reason code',
      labelNames: ['code'],
      registers: [registry],
    }),
    ruleEvaluation: new Histogram({
      name: 'rxtrace_rule_evaluation_seconds',
      help: 'Rule engine evaluation latency per batch',
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05],
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'rxtrace_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    mqttConnectionsRefused: new Counter({
      name: 'rxtrace_mqtt_connections_refused_total',
      help: 'MQTT CONNECTs refused, by CONNACK reason',
      labelNames: ['reason'],
      registers: [registry],
    }),
    mqttAclDenied: new Counter({
      name: 'rxtrace_mqtt_acl_denied_total',
      help: 'MQTT publishes and subscriptions refused by the ACL',
      labelNames: ['action'],
      registers: [registry],
    }),
    mqttReadingsPublishes: new Counter({
      name: 'rxtrace_mqtt_readings_publishes_total',
      help: 'Readings publishes by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    mqttLimitsEnforced: new Counter({
      name: 'rxtrace_mqtt_limits_enforced_total',
      help: "MQTT limits enforced: packet over the size limit, session beyond the tote's limit, message dropped from a full queue",
      labelNames: ['limit'],
      registers: [registry],
    }),
    // Retention (docs/operations.md): what the expirer removed, when its last pass completed, and how far behind it is.
    expiredRows: new Counter({
      name: 'rxtrace_retention_removed_total',
      help: 'Rows removed by retention, by table (readings: dropped months counted by the planner’s estimate)',
      labelNames: ['table'],
      registers: [registry],
    }),
    expiryLastPass: new Gauge({
      name: 'rxtrace_retention_last_pass_timestamp_seconds',
      help: 'When the last complete expiry pass of this process ended (epoch seconds; 0: none yet)',
      registers: [registry],
      collect() {
        this.set(lastPassAt)
      },
    }),
    followsPending: new Gauge({
      name: 'rxtrace_binding_follows_pending',
      help: 'Tote binding changes the stored readings have not followed yet, as the last expiry pass found them (unbound readings wait for them)',
      registers: [registry],
    }),
    expiryDeferred: new Counter({
      name: 'rxtrace_retention_deferred_batches_total',
      help: 'Readings expiry batches the store deferred while its WAL checkpoints were behind ingest (SQLite)',
      registers: [registry],
    }),
    expiryPassDuration: new Gauge({
      name: 'rxtrace_retention_pass_duration_seconds',
      help: 'How long the last complete expiry pass took',
      registers: [registry],
    }),
    expiryLag: new Gauge({
      name: 'rxtrace_retention_lag_seconds',
      help: 'Seconds since the last complete expiry pass (since start when none): grows when expiry falls behind or stops',
      registers: [registry],
      collect() {
        this.set(Date.now() / 1_000 - (lastPassAt || startedAt))
      },
    }),
    /** Records a complete expiry pass. */
    expiryPassDone(atMs: number, seconds: number) {
      lastPassAt = atMs / 1_000
      this.expiryPassDuration.set(seconds)
    },
  }
}

export type Metrics = ReturnType<typeof createMetrics>
