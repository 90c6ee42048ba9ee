#!/usr/bin/env python3
"""Writes, beside this file (committed; run again after editing the panels here or the rules file):
dashboards/*.json, the Grafana dashboards, each with the variables datasource, namespace and pod on
which every panel's query filters; prometheus-rule.yaml, the PrometheusRule object holding the
groups of warpsearch.rules.yml. tests/integration/monitoring_test.py evaluates every query and
alert against a real Prometheus scraping a running cluster; k8s_test checks the PrometheusRule
matches the rules file."""
import json, os

SEL = 'namespace=~"$namespace", pod=~"$pod"'
RATE = "$__rate_interval"


def panel(title, exprs, unit="short", kind="timeseries"):
    return {"title": title, "type": kind, "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(65 + i), "expr": e, "legendFormat": legend}
                        for i, (e, legend) in enumerate(exprs)]}


def dashboard(uid, title, metric, panels):
    for i, p in enumerate(panels):
        p["id"] = i + 1
        p["gridPos"] = {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)}
    variable = lambda name, query: {
        "name": name, "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name}, "definition": query, "refresh": 2, "includeAll": True,
        "multi": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"}}
    return {"uid": uid, "title": title, "tags": ["warpsearch"], "timezone": "browser", "schemaVersion": 39,
            "refresh": "30s", "time": {"from": "now-1h", "to": "now"}, "editable": True, "panels": panels,
            "templating": {"list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "current": {}},
                variable("namespace", "label_values(%s, namespace)" % metric),
                variable("pod", 'label_values(%s{namespace=~"$namespace"}, pod)' % metric)]}}


def quantiles(metric, by=""):
    group = "le" + (", " + by if by else "")
    return [("histogram_quantile(%s, sum by (%s) (rate(%s_bucket{%s}[%s])))" % (q, group, metric, SEL, RATE),
             "p%d" % round(float(q) * 100) + (" {{%s}}" % by if by else "")) for q in ("0.5", "0.9", "0.99")]


overview = dashboard("warpsearch-overview", "Warpsearch / Overview", "warpsearch_broker_requests_total", [
    panel("Search requests/s by status", [('sum by (status) (rate(warpsearch_broker_requests_total{endpoint="/search", %s}[%s]))' % (SEL, RATE), "{{status}}")], "reqps"),
    panel("Errors/s by status (4xx, 5xx)", [('sum by (status) (rate(warpsearch_broker_requests_total{status=~"[45]..", %s}[%s]))' % (SEL, RATE), "{{status}}")], "reqps"),
    panel("Search latency (broker)", quantiles("warpsearch_broker_request_seconds"), "s"),
    panel("Cache hit ratio", [("sum(rate(warpsearch_broker_cache_hits_total{%s}[%s])) / (sum(rate(warpsearch_broker_cache_hits_total{%s}[%s])) + sum(rate(warpsearch_broker_cache_misses_total{%s}[%s])))" % (SEL, RATE, SEL, RATE, SEL, RATE), "hit ratio")], "percentunit"),
    panel("Partial answers/s and fan-out retries/s", [
        ("sum(rate(warpsearch_broker_partial_results_total{%s}[%s]))" % (SEL, RATE), "partial"),
        ("sum(rate(warpsearch_broker_fanout_retries_total{%s}[%s]))" % (SEL, RATE), "retries")], "reqps"),
    panel("Refused at once (503) by reason", [("sum by (reason) (rate(warpsearch_broker_rejected_total{%s}[%s]))" % (SEL, RATE), "{{reason}}")], "reqps"),
    panel("Healthy replicas per partition", [('min by (partition) (warpsearch_broker_replicas{state="healthy", %s})' % SEL, "partition {{partition}}")]),
    panel("Queries in the fan-out, open HTTP connections", [
        ("sum(warpsearch_broker_in_flight{%s})" % SEL, "in flight"),
        ("sum(warpsearch_broker_http_connections{%s})" % SEL, "connections")]),
    panel("Uncached search time by stage (mean: broker, transport, leaf)", [
        ("sum by (stage) (rate(warpsearch_broker_stage_seconds_sum{%s}[%s])) / sum by (stage) (rate(warpsearch_broker_stage_seconds_count{%s}[%s]))" % (SEL, RATE, SEL, RATE), "{{stage}}")], "s"),
    panel("Leaf search requests/s by path (direct search path, ZeroMQ)", [("sum by (path) (rate(warpsearch_broker_leaf_requests_total{%s}[%s]))" % (SEL, RATE), "{{path}}")], "reqps"),
    panel("Latency per leaf (p99, broker side)", [("histogram_quantile(0.99, sum by (le, leaf) (rate(warpsearch_broker_leaf_seconds_bucket{%s}[%s])))" % (SEL, RATE), "{{leaf}}")], "s"),
])

leaves = dashboard("warpsearch-leaves", "Warpsearch / Leaves", "warpsearch_leaf_requests_total", [
    panel("Query time per processor", quantiles("warpsearch_leaf_query_seconds", "processor"), "s"),
    panel("Requests/s by kind", [("sum by (kind) (rate(warpsearch_leaf_requests_total{%s}[%s]))" % (SEL, RATE), "{{kind}}")], "reqps"),
    panel("Queue depth and queries in flight", [
        ("sum by (pod, instance) (warpsearch_leaf_queue_depth{%s})" % SEL, "queue {{pod}}{{instance}}"),
        ("sum by (pod, instance) (warpsearch_leaf_in_flight{%s})" % SEL, "in flight {{pod}}{{instance}}")]),
    panel("Searches answered on the front-end thread/s", [("sum(rate(warpsearch_leaf_answered_inline_total{%s}[%s]))" % (SEL, RATE), "inline")], "reqps"),
    panel("GPU bytes resident", [("sum by (pod, instance) (warpsearch_leaf_gpu_bytes_resident{%s})" % SEL, "{{pod}}{{instance}}")], "bytes"),
    panel("GPU serving the generation (1) or the CPU alone (0)", [("max by (pod, instance) (warpsearch_leaf_gpu_serving{%s})" % SEL, "{{pod}}{{instance}}")]),
    panel("GPU list-cache hit ratio", [("sum(rate(warpsearch_leaf_gpu_list_cache_hits_total{%s}[%s])) / clamp_min(sum(rate(warpsearch_leaf_gpu_list_cache_hits_total{%s}[%s])) + sum(rate(warpsearch_leaf_gpu_list_cache_misses_total{%s}[%s])), 1e-9)" % (SEL, RATE, SEL, RATE, SEL, RATE), "hit ratio")], "percentunit"),
    panel("Filters' cache: searches/s whose filter was cached or evaluated", [
        ("sum(rate(warpsearch_leaf_filter_cache_hits_total{%s}[%s]))" % (SEL, RATE), "cached"),
        ("sum(rate(warpsearch_leaf_filter_cache_misses_total{%s}[%s]))" % (SEL, RATE), "evaluated")], "reqps"),
    panel("Generation per leaf", [("max by (pod, instance) (warpsearch_leaf_generation{%s})" % SEL, "{{pod}}{{instance}}")]),
    panel("Written documents held over the generation (near-real-time segment)", [("max by (pod, instance) (warpsearch_leaf_live_writes{%s})" % SEL, "{{pod}}{{instance}}")]),
    panel("Write apply delay (durable in the log to searched here)", quantiles("warpsearch_leaf_live_apply_delay_seconds"), "s"),
    panel("Written documents' segments searched and merges under way", [
        ("max by (pod, instance) (warpsearch_leaf_live_segments{%s})" % SEL, "segments {{pod}}{{instance}}"),
        ("max by (pod, instance) (warpsearch_leaf_live_merges{%s})" % SEL, "merges {{pod}}{{instance}}")]),
    panel("Scheduler: queries waiting by queue (cpu, gpu, flexible)", [("sum by (queue) (warpsearch_leaf_scheduler_queue_depth{%s})" % SEL, "{{queue}}")]),
    panel("Scheduler: answers/s by processor", [("sum by (processor) (rate(warpsearch_leaf_scheduler_queries_total{%s}[%s]))" % (SEL, RATE), "{{processor}}")], "reqps"),
    panel("Scheduler: predicted against measured time by processor (s/s)", [
        ("sum by (processor) (rate(warpsearch_leaf_scheduler_predicted_seconds_total{%s}[%s]))" % (SEL, RATE), "predicted {{processor}}"),
        ("sum by (processor) (rate(warpsearch_leaf_scheduler_measured_seconds_total{%s}[%s]))" % (SEL, RATE), "measured {{processor}}")]),
    panel("Scheduler: probes and steals/s by taker", [
        ("sum by (processor) (rate(warpsearch_leaf_scheduler_probes_total{%s}[%s]))" % (SEL, RATE), "probes {{processor}}"),
        ("sum by (processor) (rate(warpsearch_leaf_scheduler_steals_total{%s}[%s]))" % (SEL, RATE), "steals {{processor}}")], "reqps"),
    panel("Generations behind the indexer", [('scalar(max(warpsearch_indexer_generation{namespace=~"$namespace"})) - max by (pod, instance) (warpsearch_leaf_generation{%s})' % SEL, "{{pod}}{{instance}}")]),
])

indexer = dashboard("warpsearch-indexer", "Warpsearch / Indexer", "warpsearch_indexer_generation", [
    panel("Documents/s", [("sum(rate(warpsearch_indexer_documents_total{%s}[%s]))" % (SEL, RATE), "documents/s")]),
    panel("Input MB/s", [("sum(rate(warpsearch_indexer_input_bytes_total{%s}[%s])) / 1e6" % (SEL, RATE), "MB/s")]),
    panel("Rejected records/s and failed builds", [
        ("sum(rate(warpsearch_indexer_records_rejected_total{%s}[%s]))" % (SEL, RATE), "rejected/s"),
        ("sum(increase(warpsearch_indexer_builds_failed_total{%s}[1h]))" % SEL, "failed builds (1 h)")]),
    panel("Last build time", [("max(warpsearch_indexer_last_build_seconds{%s})" % SEL, "seconds")], "s"),
    panel("Generation published", [("max(warpsearch_indexer_generation{%s})" % SEL, "generation")]),
    panel("File chunks fetched by leaves/s", [("sum(rate(warpsearch_indexer_fetch_requests_total{%s}[%s]))" % (SEL, RATE), "chunks/s")]),
    panel("GPU analysis: documents/s, table misses/s, failed builds", [
        ("sum(rate(warpsearch_indexer_gpu_analysis_documents_total{%s}[%s]))" % (SEL, RATE), "documents/s on the GPU"),
        ("sum(rate(warpsearch_indexer_gpu_analysis_misses_total{%s}[%s]))" % (SEL, RATE), "tokens missed/s (CPU)"),
        ("sum(increase(warpsearch_indexer_gpu_analysis_failures_total{%s}[1h]))" % SEL, "builds the GPU failed (1 h)")]),
    panel("Writes through the API/s", [("sum(rate(warpsearch_indexer_write_ops_total{%s}[%s]))" % (SEL, RATE), "writes/s")], "ops"),
    panel("Writes: logged, in the latest generation, served by the slowest leaf", [
        ("max(warpsearch_indexer_write_log_sequence{%s})" % SEL, "logged"),
        ("max(warpsearch_indexer_folded_sequence{%s})" % SEL, "in the latest generation"),
        ('min(warpsearch_leaf_write_sequence{namespace=~"$namespace"})', "served by every leaf")]),
    panel("Write-log lag of the slowest tailing leaf (writes), leaves tailing", [
        ("max(warpsearch_indexer_write_apply_lag{%s})" % SEL, "lag"),
        ("max(warpsearch_indexer_tailing_leaves{%s})" % SEL, "leaves tailing")]),
    panel("Write requests refused for that lag (429)/s, documents held", [
        ("sum(rate(warpsearch_indexer_write_requests_held_back_total{%s}[%s]))" % (SEL, RATE), "refused/s"),
        ("max(warpsearch_indexer_live_documents{%s})" % SEL, "documents")]),
])

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "dashboards")
os.makedirs(out, exist_ok=True)
for d in (overview, leaves, indexer):
    with open(os.path.join(out, d["uid"] + ".json"), "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")

# The PrometheusRule: the rules file's groups, indented under spec (the file is YAML; kept verbatim).
rules = open(os.path.join(here, "warpsearch.rules.yml")).read()
body = [line for line in rules.splitlines() if not line.startswith("#")]
with open(os.path.join(here, "prometheus-rule.yaml"), "w") as f:
    f.write("# Generated by generate.py from warpsearch.rules.yml: edit that file, then run generate.py.\n")
    f.write("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: warpsearch\n"
            "  labels: {release: prometheus}\nspec:\n")
    for line in body:
        f.write(("  " + line) if line.strip() else "")
        f.write("\n")
