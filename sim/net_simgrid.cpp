/*
 * net_simgrid.cpp -- the cluster network on SimGrid (net.h, engine
 * "simgrid"): `--network simgrid:PLATFORM.xml[,model=M][,cfg=KEY:VALUE...]`.
 *
 * SimGrid's flow-level models share every link between the transfers that
 * cross it (max-min fairness solved over the whole platform), so a platform
 * may describe what the built-in network cannot: a shared or tapered
 * fabric, links of different speeds on one path.
 *
 * The platform (sim/platforms/README.md): the GPUs are the hosts named
 * gpu<k>, k = 0 .. n-1 node-major; a node is the netzone that holds its
 * GPUs, every node holds the same number of them, GPU k lives in the node of
 * GPU k - k % G. Other hosts and routers are ignored. A name without a
 * slash that is not a file here is looked for among the shipped platforms
 * (DATA/platforms, DATA from net.h's data_dir), ".xml" added
 * when missing: `simgrid:4x8` is sim/platforms/4x8.xml.
 *
 * The network model: CM02 without cross-traffic by default, i.e. a transfer
 * takes the route's latency, then moves its bytes at its max-min fair share
 * of every link on the route: the built-in network's model, so that the two
 * engines differ only where the platforms do (README.md says why not LV08:
 * its latency x13.01 and bandwidth x0.97 factors, fitted to TCP over
 * Ethernet, and its TCP window bound do not describe NVLink or InfiniBand
 * RDMA). `model=LV08` (or any SimGrid network model) and `cfg=KEY:VALUE`
 * (any --cfg of SimGrid) change it.
 *
 * SimGrid runs one simulation per process, created at open: a second open
 * in the same process fails with one line. The cluster simulator's loop runs
 * inside one SimGrid actor (run); start() is Comm::sendto_async, next() is
 * Comm::wait_any_for with the time left to `until`. SimGrid's clock is a
 * double in seconds; ours is integer ns, read from SimGrid's absolute clock
 * at each completion (rounded to the nearest ns, never before the last time
 * reported, never after until), and timeouts are computed from absolute
 * dates, so that rounding never accumulates.
 */
#include <simgrid/s4u.hpp>
#include <simgrid/version.h>

extern "C" {
#include "sim/net.h"
#include "sim/sim.h"
}

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>
#include <dirent.h>
#include <sys/stat.h>

namespace sg4 = simgrid::s4u;

namespace {

/* SimGrid's engine: one per process, never destroyed (SimGrid cannot make a
 * second one), reachable from here for the leak checkers. */
sg4::Engine *engine;

struct Net {
    std::vector<sg4::Host *> gpus;
    std::string model;
    /* In flight, in the order started (ids ascending). */
    std::vector<sg4::CommPtr> comms;
    std::vector<int64_t> ids;
    /* Completed at now_ns, not yet reported. */
    std::deque<int64_t> done;
    int64_t now_ns = 0, next_id = 0;
    /* Bytes per link (a split-duplex link's directions apart), for busiest(). */
    std::map<std::string, uint64_t> link_bytes;
};

void say(char *err, size_t errlen, const std::string &line)
{
    snprintf(err, errlen, "%s", line.c_str());
}

/* DATA/platforms, DATA being net.h's data_dir (an install's share/syncsim,
 * the build tree's, else the source tree's sim/). */
std::string platforms_dir(const sim_net *n)
{
    return std::string(n->data_dir ? n->data_dir : ".") + "/platforms";
}

std::string shipped_list(const std::string &dir)
{
    std::vector<std::string> names;
    if (DIR *d = opendir(dir.c_str())) {
        while (const dirent *e = readdir(d)) {
            std::string s = e->d_name;
            if (s.size() > 4 && s.compare(s.size() - 4, 4, ".xml") == 0)
                names.push_back(s);
        }
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    std::string out;
    for (const std::string &s : names)
        out += (out.empty() ? "" : ", ") + s;
    return out.empty() ? "none" : out;
}

/* The file a platform name means, or "" with the reason in err. */
std::string resolve(const sim_net *n, const std::string &name, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(name.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        /* SimGrid's parser says only "input in flex scanner failed" */
        say(err, errlen,
            "simgrid: '" + name + "' is a directory, not a platform file (its .xml files: " +
                shipped_list(name) + ")");
        return "";
    }
    if (access(name.c_str(), R_OK) == 0)
        return name;
    std::string dir = platforms_dir(n);
    if (name.find('/') == std::string::npos) {
        std::string file = dir + "/" + name;
        if (name.size() < 4 || name.compare(name.size() - 4, 4, ".xml") != 0)
            file += ".xml";
        if (access(file.c_str(), R_OK) == 0)
            return file;
    }
    say(err, errlen,
        "simgrid: no platform '" + name + "' (" + strerror(errno) +
            "): give a SimGrid platform file, or one of those shipped in " + dir + ": " +
            shipped_list(dir));
    return "";
}

/* k when name is "gpu<k>", else -1. */
long gpu_index(const std::string &name)
{
    if (name.size() < 4 || name.compare(0, 3, "gpu") != 0)
        return -1;
    long k = 0;
    for (size_t i = 3; i < name.size(); i++) {
        if (name[i] < '0' || name[i] > '9' || k > INT_MAX / 10)
            return -1;
        k = k * 10 + (name[i] - '0');
    }
    return (name[3] == '0' && name.size() > 4) ? -1 : k;
}

/* Fills net->gpus and n's shape from the platform, or says why not. */
bool find_gpus(Net *net, sim_net *n, const std::string &file, char *err, size_t errlen)
{
    std::vector<sg4::Host *> hosts = engine->get_all_hosts();
    std::vector<sg4::Host *> gpus;
    for (sg4::Host *h : hosts) {
        long k = gpu_index(h->get_name());
        if (k < 0)
            continue;
        if ((size_t)k >= gpus.size())
            gpus.resize((size_t)k + 1, nullptr);
        gpus[(size_t)k] = h;
    }
    if (gpus.empty()) {
        say(err, errlen, "simgrid: " + file +
                             ": no GPU host (hosts named gpu0, gpu1, ..., node-major; "
                             "sim/platforms/README.md)");
        return false;
    }
    for (size_t k = 0; k < gpus.size(); k++)
        if (!gpus[k]) {
            say(err, errlen, "simgrid: " + file + ": there is a gpu" +
                                 std::to_string(gpus.size() - 1) + " but no gpu" +
                                 std::to_string(k) + " (GPUs are numbered from 0 without gaps)");
            return false;
        }
    const sg4::NetZone *node0 = gpus[0]->get_englobing_zone();
    size_t per = 0;
    while (per < gpus.size() && gpus[per]->get_englobing_zone() == node0)
        per++;
    if (gpus.size() % per != 0) {
        say(err, errlen, "simgrid: " + file + ": " + std::to_string(gpus.size()) +
                             " GPUs do not make nodes of " + std::to_string(per) +
                             " (the GPUs of gpu0's zone " + node0->get_name() + ")");
        return false;
    }
    for (size_t k = 0; k < gpus.size(); k++) {
        const sg4::NetZone *z = gpus[k]->get_englobing_zone();
        const sg4::NetZone *first = gpus[k - k % per]->get_englobing_zone();
        bool seen_before = k >= per && k % per == 0 &&
                           std::any_of(gpus.begin(), gpus.begin() + (long)k,
                                       [z](const sg4::Host *h) { return h->get_englobing_zone() == z; });
        if (z != first || seen_before) {
            say(err, errlen, "simgrid: " + file + ": gpu" + std::to_string(k) + " is in zone " +
                                 z->get_name() + ", not node-major: with " + std::to_string(per) +
                                 " GPUs per node, gpu" + std::to_string(k) + " belongs with gpu" +
                                 std::to_string(k - k % per) + " (sim/platforms/README.md)");
            return false;
        }
    }
    net->gpus = gpus;
    n->n_gpus = (int)gpus.size();
    n->gpus_per_node = (int)per;
    return true;
}

int sg_open(sim_net *n, const char *arg, char *err, size_t errlen)
{
    if (engine) {
        say(err, errlen,
            "simgrid: SimGrid runs one simulation per process and this one has already opened "
            "one; run syncsim again for another network");
        return -1;
    }
    std::string spec = arg ? arg : "";
    std::vector<std::string> parts;
    for (size_t at = 0;;) {
        size_t comma = spec.find(',', at);
        parts.push_back(spec.substr(at, comma == std::string::npos ? comma : comma - at));
        if (comma == std::string::npos)
            break;
        at = comma + 1;
    }
    if (parts[0].empty()) {
        say(err, errlen, "simgrid: give a platform: simgrid:FILE.xml[,model=CM02|LV08][,cfg=KEY:VALUE], "
                         "e.g. simgrid:4x8.xml");
        return -1;
    }
    std::string model = "CM02";
    std::vector<std::string> cfgs;
    for (size_t i = 1; i < parts.size(); i++) {
        const std::string &p = parts[i];
        if (p.compare(0, 6, "model=") == 0 && p.size() > 6)
            model = p.substr(6);
        else if (p.compare(0, 4, "cfg=") == 0 && p.find(':') != std::string::npos)
            cfgs.push_back(p.substr(4));
        else {
            say(err, errlen, "simgrid: unknown option '" + p +
                                 "' (expected model=CM02|LV08|... or cfg=KEY:VALUE, SimGrid's --cfg)");
            return -1;
        }
    }
    /* SimGrid aborts on a model it does not know: check first. */
    static const char *const models[] = {"CM02", "LV08", "SMPI", "IB", "Constant"};
    if (std::none_of(std::begin(models), std::end(models),
                     [&model](const char *m) { return model == m; })) {
        say(err, errlen, "simgrid: unknown network model '" + model +
                             "' (expected CM02, LV08, SMPI, IB or Constant)");
        return -1;
    }
    std::string file = resolve(n, parts[0], err, errlen);
    if (file.empty())
        return -1;

    /* The arguments SimGrid parses: quiet unless something goes wrong, the
     * model, no cross-traffic (the reverse route's TCP acknowledgements: an
     * RDMA transfer has none), then the user's settings. */
    static std::vector<std::string> args;
    args = {"syncsim", "--log=root.thresh:warning", "--cfg=network/model:" + model};
    if (model == "CM02")
        args.push_back("--cfg=network/crosstraffic:0");
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* The sanitizers follow threads, not SimGrid's hand-made stack switches. */
    args.push_back("--cfg=contexts/factory:thread");
#endif
    for (const std::string &c : cfgs)
        args.push_back("--cfg=" + c);
    static std::vector<char *> argv;
    argv.clear();
    for (std::string &a : args)
        argv.push_back(&a[0]);
    argv.push_back(nullptr);
    int argc = (int)args.size();

    auto *net = new Net;
    net->model = model;
    /* SimGrid says what is wrong in an exception; its first line is enough
     * (a bad key is followed by the list of every key). */
    auto first_line = [](const std::exception &e) {
        std::string what = e.what();
        return what.substr(0, what.find('\n'));
    };
    try {
        engine = new sg4::Engine(&argc, argv.data());
    } catch (const std::exception &e) {
        std::string given = "model=" + model;
        for (const std::string &c : cfgs)
            given += ",cfg=" + c;
        say(err, errlen, "simgrid: " + given + ": " + first_line(e));
        delete net;
        return -1;
    }
    try {
        engine->load_platform(file);
    } catch (const std::exception &e) {
        say(err, errlen, "simgrid: " + file + ": " + first_line(e));
        delete net;
        return -1;
    }
    if (!find_gpus(net, n, file, err, errlen)) {
        delete net;
        return -1;
    }
    std::string base = file.substr(file.find_last_of('/') + 1);
    int nodes = n->n_gpus / n->gpus_per_node;
    snprintf(n->describe, sizeof n->describe, "simgrid:%s: %d node%s x %d GPUs, SimGrid %d.%d %s%s",
             base.c_str(), nodes, nodes == 1 ? "" : "s", n->gpus_per_node, SIMGRID_VERSION_MAJOR,
             SIMGRID_VERSION_MINOR, model.c_str(),
             model == "CM02" ? " (max-min sharing, no TCP factors, no cross-traffic)" : "");
    n->ctx = net;
    return 0;
}

int sg_run(sim_net *n, int (*body)(void *arg), void *arg)
{
    Net *net = static_cast<Net *>(n->ctx);
    int rc = -1;
    sg4::Actor::create("syncsim", net->gpus[0], [&rc, body, arg]() { rc = body(arg); });
    engine->run();
    return rc;
}

/* SimGrid's clock in ns, rounded, within [net->now_ns, until]. */
int64_t clock_ns(const Net *net, int64_t until)
{
    double t = std::nearbyint(sg4::Engine::get_clock() * 1e9);
    if (!(t < (double)until))
        return until;
    return std::max(net->now_ns, (int64_t)t);
}

int64_t sg_start(sim_net *n, int64_t now, int src, int dst, uint64_t bytes)
{
    Net *net = static_cast<Net *>(n->ctx);
    if (now > net->now_ns) {
        sg4::this_actor::sleep_until((double)now * 1e-9);
        net->now_ns = now;
    }
    sg4::Host *from = net->gpus[(size_t)src], *to = net->gpus[(size_t)dst];
    std::vector<sg4::Link *> links;
    double latency = 0;
    from->route_to(to, links, &latency);
    /* Shared links only (a FATPIPE gives every flow its whole bandwidth),
     * each once per transfer. */
    std::sort(links.begin(), links.end());
    links.erase(std::unique(links.begin(), links.end()), links.end());
    for (const sg4::Link *l : links)
        if (l->get_sharing_policy() != sg4::Link::SharingPolicy::FATPIPE)
            net->link_bytes[l->get_name()] += bytes;
    net->comms.push_back(sg4::Comm::sendto_async(from, to, bytes));
    net->ids.push_back(net->next_id);
    return net->next_id++;
}

bool sg_next(sim_net *n, int64_t until, int64_t *at, int64_t *id)
{
    Net *net = static_cast<Net *>(n->ctx);
    /* Already at until: nothing more can complete by then (a transfer that
     * completes exactly now, unseen because the last wait timed out at the
     * same date, is reported by the next call that moves). Saves a wait over
     * every transfer in flight for each of the simulator's events at one
     * date. */
    bool there = until != INT64_MAX && until <= net->now_ns;
    if (net->done.empty() && !net->comms.empty() && !there) {
        double timeout = -1;        /* wait_any: until the next completion */
        if (until != INT64_MAX)
            timeout = std::max(0.0, (double)until * 1e-9 - sg4::Engine::get_clock());
        ssize_t first = sg4::Comm::wait_any_for(net->comms, timeout);
        if (first < 0) {
            net->now_ns = std::max(net->now_ns, until);
            return false;
        }
        /* Every transfer that completed did so now (those that completed
         * earlier were reported then): all of them, in the order started. */
        net->now_ns = clock_ns(net, until);
        size_t keep = 0;
        for (size_t i = 0; i < net->comms.size(); i++) {
            if ((ssize_t)i == first || net->comms[i]->test()) {
                net->done.push_back(net->ids[i]);
            } else {
                net->comms[keep] = net->comms[i];
                net->ids[keep] = net->ids[i];
                keep++;
            }
        }
        net->comms.resize(keep);
        net->ids.resize(keep);
    }
    if (net->done.empty())
        return false;
    *at = net->now_ns;
    *id = net->done.front();
    net->done.pop_front();
    return true;
}

uint64_t sg_busiest(const sim_net *n, char *name, size_t len)
{
    const Net *net = static_cast<const Net *>(n->ctx);
    const std::pair<const std::string, uint64_t> *best = nullptr;
    for (const auto &kv : net->link_bytes)
        if (!best || kv.second > best->second)
            best = &kv;
    snprintf(name, len, "%s", best ? best->first.c_str() : "-");
    return best ? best->second : 0;
}

void sg_close(sim_net *n)
{
    delete static_cast<Net *>(n->ctx);
    n->ctx = nullptr;
}

} // namespace

extern "C" __attribute__((visibility("default"))) const sim_net_iface sim_net_simgrid = {
    "simgrid", sg_open, sg_run, sg_start, sg_next, sg_busiest, sg_close,
};
