"""What gateway_client_loop.py saw, as JSON on stdout: the requests sent, answered (200) and failed, in all and per
phase; the requests a node answered while it was out; per node, how long before its drain ended the gateway last
sent it a request; with --killed NODE@TIME, how long the gateway took to list the killed node unhealthy.

The phases come from the hooks' log (lines "time drain|undrain node ..."): a node is out from its drain line (written
once the drain is done) to its undrain line (written before it is put back); "all in" between."""
import argparse
import json


def read_loop(path):
    requests, views = [], []
    with open(path) as log:
        for line in log:
            entry = json.loads(line)
            (views if "workers_at" in entry else requests).append(entry)
    return requests, views


def read_hooks(path):
    events = []
    if path:
        with open(path) as log:
            for line in log:
                fields = line.split()
                events.append((float(fields[0]), fields[1], fields[2]))
    return sorted(events)


def phases(events, start, end):
    """[(name, start, end, node out or None)] covering start..end."""
    found, since, out = [], start, None
    for moment, hook, node in events:
        if hook == "drain":
            found.append(("all in", since, moment, None))
            since, out = moment, node
        elif hook == "undrain" and node == out:
            found.append(("%s out" % node, since, moment, node))
            since, out = moment, None
    found.append(("%s out" % out if out else "all in", since, end, out))
    return [phase for phase in found if phase[2] > phase[1]]


def counts(requests, ports):
    answered = [request for request in requests if request["status"] == 200]
    by_node = dict((node, 0) for node in ports)
    for request in answered:
        for node, port in ports.items():
            if request["port"] == port:
                by_node[node] += 1
    return dict(sent=len(requests), answered=len(answered), failed=len(requests) - len(answered), by_node=by_node)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loop", required=True)
    parser.add_argument("--hooks")
    parser.add_argument("--node", action="append", default=[], help="NAME=PORT")
    parser.add_argument("--worker", action="append", default=[], help="NAME=URL as the gateway lists it")
    parser.add_argument("--killed", help="NAME@EPOCH")
    args = parser.parse_args()
    ports = dict((name, int(port)) for name, port in (node.split("=", 1) for node in args.node))
    urls = dict(worker.split("=", 1) for worker in args.worker)
    requests, views = read_loop(args.loop)
    events = read_hooks(args.hooks)
    start, end = requests[0]["sent"], requests[-1]["done"]
    report = dict(total=counts(requests, ports), phases=[], answered_while_out=[], routing_ended_before_drain_s={},
                  failures=[request for request in requests if request["status"] != 200][:10])
    for name, begin, finish, out in phases(events, start, end):
        within = [request for request in requests if begin <= request["sent"] < finish]
        report["phases"].append(dict(counts(within, ports), phase=name, seconds=round(finish - begin, 2)))
        if out:
            report["answered_while_out"] += [dict(request, node=out) for request in within
                                             if request["status"] == 200 and request["port"] == ports[out]]
            before = [request["sent"] for request in requests
                      if request["sent"] < begin and request["status"] == 200 and request["port"] == ports[out]]
            report["routing_ended_before_drain_s"][out] = round(begin - max(before), 3) if before else None
    if args.killed:
        node, moment = args.killed.split("@")
        moment = float(moment)
        after = [request for request in requests if request["sent"] >= moment]
        answered_by_it = [request["done"] for request in requests
                          if request["status"] == 200 and request["port"] == ports[node]]
        unhealthy = [view["workers_at"] for view in views
                     if view["workers_at"] >= moment and view["healthy"].get(urls[node]) is False]
        report["killed"] = dict(node=node, after=counts(after, ports),
                                seconds_to_unhealthy=round(min(unhealthy) - moment, 2) if unhealthy else None,
                                last_answered_by_it_s=(round(max(answered_by_it) - moment, 3) if answered_by_it
                                                       else None))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
