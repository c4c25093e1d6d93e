// The S3 client (xendump/s3.hpp) over libcurl. curl signs each request
// (CURLOPT_AWS_SIGV4, "aws:amz:REGION:s3"): it takes the payload's hash
// from the x-amz-content-sha256 header we give (curl 7.88 does not send one
// itself, and RGW and AWS refuse a SigV4 request without it), and the
// canonical query string as the URL has it (7.88 does not sort it), so
// the query is built here already sorted and encoded as SigV4 wants.
#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "store/xml.hpp"
#include "xendump/error.hpp"
#include "xendump/s3.hpp"

namespace xendump::s3 {

namespace {

// What a response body that is a document (a listing, an error) may be.
constexpr size_t kMaxDocument = 16u << 20;

bool bucket_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'; }

// SigV4's URI encoding: everything but the unreserved characters (and '/'
// in a path) as %XX, upper case.
std::string uri_encode(std::string_view s, bool keep_slash) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~' || (keep_slash && c == '/')) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

// Padded base64 (RFC 4648), as Content-MD5 takes it.
std::string base64_of(std::span<const unsigned char> data) {
    std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data.data(), static_cast<int>(data.size()));
    out.resize(static_cast<size_t>(n));
    return out;
}

std::string sha256_hex(std::span<const std::byte> data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
        throw Error("SHA-256 failed (OpenSSL)");
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
        out += hex[md[i] >> 4];
        out += hex[md[i] & 15];
    }
    return out;
}

struct EasyDeleter {
    void operator()(CURL* c) const noexcept { curl_easy_cleanup(c); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;
struct SlistDeleter {
    void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

void init_curl_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error("cannot initialise libcurl");
    });
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

using Query = std::vector<std::pair<std::string, std::string>>;

struct Request {
    const char* method = "GET";
    std::string bucket;
    std::string key;
    Query query;
    std::vector<std::string> headers;
    std::span<const std::byte> body;
    // The body's SHA-256 is not taken: x-amz-content-sha256 says
    // UNSIGNED-PAYLOAD (a signed Content-MD5 header covers the body instead).
    bool unsigned_payload = false;
    std::span<std::byte> into;  // a ranged GET: exactly these bytes
    bool has_into = false;
};

struct Response {
    long status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // names lower case
    size_t into_filled = 0;
};

// One attempt's transfer state, seen by curl's callbacks.
struct Transfer {
    const Request* req = nullptr;
    Response* resp = nullptr;
    size_t sent = 0;
    bool overflow = false;
};

size_t on_write(char* ptr, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = size * n;
    if (t->req->has_into && t->resp->status / 100 == 2) {
        std::span<std::byte> into = t->req->into;
        if (len > into.size() - t->resp->into_filled) {
            t->overflow = true;
            return 0;  // more than asked for: abort
        }
        std::memcpy(into.data() + t->resp->into_filled, ptr, len);
        t->resp->into_filled += len;
        return len;
    }
    if (len > kMaxDocument - t->resp->body.size()) {
        t->overflow = true;
        return 0;
    }
    t->resp->body.append(ptr, len);
    return len;
}

size_t on_header(char* ptr, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = size * n;
    std::string_view line(ptr, len);
    if (line.starts_with("HTTP/")) {  // a new response (after 100 Continue): its own headers
        t->resp->headers.clear();
        const auto sp = line.find(' ');
        if (sp != std::string_view::npos) t->resp->status = std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
        return len;
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return len;
    std::string name = lower(std::string(line.substr(0, colon)));
    std::string_view v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
    t->resp->headers[name] = std::string(v);
    return len;
}

size_t on_read(char* buf, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t len = std::min(size * n, t->req->body.size() - t->sent);
    std::memcpy(buf, t->req->body.data() + t->sent, len);
    t->sent += len;
    return len;
}

int on_seek(void* user, curl_off_t offset, int origin) {
    auto* t = static_cast<Transfer*>(user);
    if (origin != SEEK_SET || offset < 0 || static_cast<uint64_t>(offset) > t->req->body.size())
        return CURL_SEEKFUNC_FAIL;
    t->sent = static_cast<size_t>(offset);
    return CURL_SEEKFUNC_OK;
}

// curl errors worth another attempt: the network, not the request.
bool transient(CURLcode c) {
    switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

bool transient_status(long status) { return status == 429 || status == 500 || status == 502 || status == 503 || status == 504; }

// S3's <Error> document: "CODE: MESSAGE", or the HTTP status alone.
std::string describe_error(const Response& r, const std::string& what) {
    std::string out = "HTTP " + std::to_string(r.status);
    if (r.body.empty()) {
        if (r.status == 403) out += " AccessDenied (wrong credentials, or no permission)";
        if (r.status == 404) out += " NotFound";
        return out;
    }
    try {
        const store::xml::Node doc = store::xml::parse(r.body, what);
        if (doc.name == "Error") {
            const std::string code = doc.text_of("Code"), msg = doc.text_of("Message");
            if (!code.empty()) out += " " + code;
            if (!msg.empty()) out += ": " + msg;
        }
    } catch (const Error&) {
        // Not S3's document (a proxy's page): the status says enough.
    }
    return out;
}

}  // namespace

bool is_url(std::string_view text) { return text.starts_with("s3://"); }

std::string Url::str() const { return "s3://" + bucket + (key.empty() ? "" : "/" + key); }

Url parse_url(std::string_view text) {
    if (!is_url(text)) throw Error("not an s3:// URL", std::string(text));
    std::string_view rest = text.substr(5);
    const auto slash = rest.find('/');
    Url u;
    u.bucket = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) u.key = std::string(rest.substr(slash + 1));
    // Bucket names as S3 allows them (3-63 of a-z 0-9 . -), so that a
    // path-style URL cannot be made to name another path.
    if (u.bucket.size() < 3 || u.bucket.size() > 63 || !std::all_of(u.bucket.begin(), u.bucket.end(), bucket_char))
        throw Error("not a bucket name (3 to 63 of a-z, 0-9, '.', '-')", std::string(text));
    if (u.key.size() > 1024) throw Error("object key longer than 1024 bytes", std::string(text));
    return u;
}

struct Client::Impl {
    Settings s;
    std::string sigv4;     // "aws:amz:REGION:s3"
    std::string userpwd;   // the keys, only ever given to curl
    std::mutex pool_mutex;
    std::vector<Easy> pool;  // idle handles: their connections stay open
    std::atomic<uint64_t> requests{0}, retries{0}, sent{0}, received{0};

    Easy take() {
        {
            std::lock_guard lock(pool_mutex);
            if (!pool.empty()) {
                Easy e = std::move(pool.back());
                pool.pop_back();
                return e;
            }
        }
        Easy e(curl_easy_init());
        if (!e) throw Error("cannot create a libcurl handle");
        return e;
    }
    void give_back(Easy e) {
        std::lock_guard lock(pool_mutex);
        if (pool.size() < 16) pool.push_back(std::move(e));
    }

    std::string url_of(const Request& r) const {
        std::string u = s.endpoint + "/" + r.bucket;
        if (!r.key.empty()) u += "/" + uri_encode(r.key, true);
        Query q = r.query;
        std::sort(q.begin(), q.end());
        for (size_t i = 0; i < q.size(); ++i)
            u += (i ? "&" : "?") + uri_encode(q[i].first, false) + "=" + uri_encode(q[i].second, false);
        return u;
    }

    // One attempt. Returns the curl code; `resp` has the status and body.
    CURLcode attempt(CURL* c, const Request& r, const std::string& url, Response& resp, std::string& curl_msg) {
        curl_easy_reset(c);
        Transfer t{&r, &resp, 0, false};
        char errbuf[CURL_ERROR_SIZE] = {};
        curl_easy_setopt(c, CURLOPT_URL, url.c_str());
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
        curl_easy_setopt(c, CURLOPT_USERPWD, userpwd.c_str());
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, static_cast<long>(s.connect_timeout.count()));
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(s.stall_timeout.count()));
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
        const std::string method = r.method;
        Slist headers;
        auto add = [&headers](const std::string& h) {
            curl_slist* n = curl_slist_append(headers.get(), h.c_str());
            if (!n) throw Error("out of memory (curl_slist_append)");
            (void)headers.release();
            headers.reset(n);
        };
        add("x-amz-content-sha256: " + (r.unsigned_payload ? std::string("UNSIGNED-PAYLOAD") : sha256_hex(r.body)));
        if (!s.credentials.session_token.empty()) add("x-amz-security-token: " + s.credentials.session_token);
        for (const auto& h : r.headers) add(h);
        if (method == "PUT") {
            curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
        } else if (method == "POST") {
            curl_easy_setopt(c, CURLOPT_POST, 1L);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
        } else if (method == "HEAD") {
            curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        } else if (method != "GET") {
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method);
        }
        if (method == "PUT" || method == "POST") {
            curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(c, CURLOPT_READDATA, &t);
            curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
            curl_easy_setopt(c, CURLOPT_SEEKDATA, &t);
        }
        // curl 7.88 signs every header it is given, an empty "Expect:" (which
        // would turn 100-continue off) included, and RGW then refuses the
        // signature: large bodies wait for 100 Continue, a round trip.
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
        const CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (status) resp.status = status;
        requests++;
        sent += t.sent;
        received += resp.body.size() + resp.into_filled;
        if (t.overflow) {
            curl_msg = "the response is longer than expected";
            return CURLE_WRITE_ERROR;
        }
        if (rc != CURLE_OK) curl_msg = errbuf[0] ? errbuf : curl_easy_strerror(rc);
        return rc;
    }

    // The request, retried while it fails for a reason that may pass.
    // Error for a failure of the transport; an HTTP error status is
    // returned (the caller knows which statuses it expects).
    Response perform(const Request& r, const std::string& what) {
        const std::string url = url_of(r);
        Easy c = take();
        std::chrono::milliseconds wait = s.first_backoff;
        for (unsigned n = 1;; ++n) {
            Response resp;
            std::string msg;
            const CURLcode rc = attempt(c.get(), r, url, resp, msg);
            const bool again = rc != CURLE_OK ? transient(rc) : transient_status(resp.status);
            if (!again || n >= std::max(1u, s.attempts)) {
                if (rc != CURLE_OK) {
                    std::string why = std::string(r.method) + " " + s.endpoint + ": " + msg;
                    if (again) why += " (after " + std::to_string(n) + " attempts)";
                    throw Error(why, what);
                }
                give_back(std::move(c));
                return resp;
            }
            retries++;
            std::this_thread::sleep_for(wait);
            wait = std::min(wait * 2, s.max_backoff);
        }
    }

    // The request, which must answer 2xx (a 200 that carries an <Error>, as
    // CompleteMultipartUpload may, is an error too).
    Response expect_ok(const Request& r, const std::string& what, const char* doing) {
        Response resp = perform(r, what);
        bool ok = resp.status / 100 == 2;
        if (ok && !resp.body.empty() && resp.body.find("<Error>") != std::string::npos) {
            try {
                ok = store::xml::parse(resp.body, what).name != "Error";
            } catch (const Error&) {
                // A body that is not a document (an object's bytes): not an error document.
            }
        }
        if (!ok) throw Error(std::string(doing) + " failed: " + describe_error(resp, what), what);
        return resp;
    }
};

Client::Client(Settings settings) : impl_(std::make_unique<Impl>()) {
    init_curl_once();
    impl_->s = std::move(settings);
    Settings& s = impl_->s;
    if (!s.endpoint.starts_with("https://") && !s.endpoint.starts_with("http://"))
        throw Error("the S3 endpoint must start with https:// (or http:// for a store without TLS)", s.endpoint);
    while (s.endpoint.back() == '/') s.endpoint.pop_back();
    if (s.region.empty() || s.region.find(':') != std::string::npos) throw Error("not a region", s.region);
    if (s.credentials.access_key_id.empty() || s.credentials.secret_access_key.empty())
        throw Error("no S3 credentials", s.endpoint);
    if (s.credentials.access_key_id.find(':') != std::string::npos)
        throw Error("an access key id cannot hold ':'", s.credentials.source);
    impl_->sigv4 = "aws:amz:" + s.region + ":s3";
    impl_->userpwd = s.credentials.access_key_id + ":" + s.credentials.secret_access_key;
}

Client::~Client() = default;

const Settings& Client::settings() const noexcept { return impl_->s; }

Traffic Client::traffic() const {
    return {impl_->requests.load(), impl_->retries.load(), impl_->sent.load(), impl_->received.load()};
}

namespace {
std::vector<std::string> metadata_headers(const std::map<std::string, std::string>& metadata) {
    std::vector<std::string> h;
    for (const auto& [k, v] : metadata) {
        if (k.empty() || v.find_first_of("\r\n") != std::string::npos || k.find_first_of(":\r\n ") != std::string::npos)
            throw Error("not an object metadata field: " + k);
        h.push_back("x-amz-meta-" + lower(k) + ": " + v);
    }
    return h;
}

uint64_t parse_u64(const std::string& s, const std::string& what, const char* field) {
    if (s.empty() || s.size() > 20 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
        throw Error(std::string("malformed response: ") + field + " '" + s.substr(0, 32) + "' is not a number", what);
    errno = 0;
    const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
    if (errno == ERANGE) throw Error(std::string("malformed response: ") + field + " out of range", what);
    return v;
}
}  // namespace

void Client::create_bucket(const std::string& bucket) {
    Url u = parse_url("s3://" + bucket);
    Request r;
    r.method = "PUT";
    r.bucket = u.bucket;
    impl_->expect_ok(r, u.str(), "CreateBucket");
}

void Client::put_object(const Url& obj, std::span<const std::byte> data, const std::map<std::string, std::string>& metadata) {
    Request r;
    r.method = "PUT";
    r.bucket = obj.bucket;
    r.key = obj.key;
    r.body = data;
    r.headers = metadata_headers(metadata);
    impl_->expect_ok(r, obj.str(), "PutObject");
}

std::optional<ObjectInfo> Client::head_object(const Url& obj) {
    Request r;
    r.method = "HEAD";
    r.bucket = obj.bucket;
    r.key = obj.key;
    Response resp = impl_->perform(r, obj.str());
    if (resp.status == 404) return std::nullopt;
    if (resp.status / 100 != 2) throw Error("HeadObject failed: " + describe_error(resp, obj.str()), obj.str());
    ObjectInfo info;
    info.key = obj.key;
    info.size = parse_u64(resp.headers["content-length"], obj.str(), "Content-Length");
    info.etag = resp.headers["etag"];
    info.last_modified = resp.headers["last-modified"];
    for (const auto& [k, v] : resp.headers)
        if (k.starts_with("x-amz-meta-")) info.metadata[k.substr(11)] = v;
    return info;
}

void Client::get_range(const Url& obj, uint64_t offset, std::span<std::byte> out) {
    if (out.empty()) return;
    Request r;
    r.bucket = obj.bucket;
    r.key = obj.key;
    r.into = out;
    r.has_into = true;
    r.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" + std::to_string(offset + out.size() - 1));
    Response resp = impl_->expect_ok(r, obj.str(), "GetObject");
    if (resp.status != 206 && !(resp.status == 200 && offset == 0))
        throw Error("GetObject: HTTP " + std::to_string(resp.status) + " to a ranged request", obj.str(), offset);
    if (resp.into_filled != out.size())
        throw Error("GetObject: " + std::to_string(resp.into_filled) + " bytes of " + std::to_string(out.size()) +
                        " asked for (the object ends before)",
                    obj.str(), offset);
}

std::vector<std::byte> Client::get_object(const Url& obj) {
    // Its size first: the body goes straight into a buffer of that size.
    const auto info = head_object(obj);
    if (!info) throw Error("GetObject: no such object", obj.str());
    std::vector<std::byte> out(static_cast<size_t>(info->size));
    get_range(obj, 0, out);
    return out;
}

void Client::delete_object(const Url& obj) {
    Request r;
    r.method = "DELETE";
    r.bucket = obj.bucket;
    r.key = obj.key;
    impl_->expect_ok(r, obj.str(), "DeleteObject");
}

std::vector<ObjectInfo> Client::list_objects(const std::string& bucket, const std::string& prefix, unsigned page_size) {
    const std::string what = Url{bucket, prefix}.str();
    std::vector<ObjectInfo> out;
    std::string token;
    for (;;) {
        Request r;
        r.bucket = bucket;
        r.query = {{"list-type", "2"}, {"max-keys", std::to_string(std::clamp(page_size, 1u, 1000u))}};
        if (!prefix.empty()) r.query.emplace_back("prefix", prefix);
        if (!token.empty()) r.query.emplace_back("continuation-token", token);
        Response resp = impl_->expect_ok(r, what, "ListObjectsV2");
        const auto doc = store::xml::parse(resp.body, what);
        if (doc.name != "ListBucketResult") throw Error("malformed response: not a ListBucketResult", what);
        for (const auto* c : doc.all("Contents")) {
            ObjectInfo o;
            o.key = c->text_of("Key");
            o.size = parse_u64(c->text_of("Size"), what, "Size");
            o.etag = c->text_of("ETag");
            o.last_modified = c->text_of("LastModified");
            out.push_back(std::move(o));
        }
        if (doc.text_of("IsTruncated") != "true") return out;
        std::string next = doc.text_of("NextContinuationToken");
        if (next.empty() || next == token) throw Error("malformed response: a truncated listing without its next token", what);
        token = std::move(next);
    }
}

std::string Client::create_multipart_upload(const Url& obj, const std::map<std::string, std::string>& metadata) {
    Request r;
    r.method = "POST";
    r.bucket = obj.bucket;
    r.key = obj.key;
    r.query = {{"uploads", ""}};
    r.headers = metadata_headers(metadata);
    r.headers.push_back("Content-Type: application/octet-stream");
    Response resp = impl_->expect_ok(r, obj.str(), "CreateMultipartUpload");
    const auto doc = store::xml::parse(resp.body, obj.str());
    std::string id = doc.text_of("UploadId");
    if (doc.name != "InitiateMultipartUploadResult" || id.empty())
        throw Error("malformed response: CreateMultipartUpload without an UploadId", obj.str());
    return id;
}

namespace {

// An UploadPart request; with the part's MD5, as Content-MD5 and an
// unsigned payload (Client::upload_part).
Request part_request(const Url& obj, const std::string& upload_id, unsigned part_number,
                     std::span<const std::byte> data, const std::array<unsigned char, 16>* md5) {
    if (part_number < 1 || part_number > 10000) throw Error("part number " + std::to_string(part_number) + " out of 1..10000", obj.str());
    Request r;
    r.method = "PUT";
    r.bucket = obj.bucket;
    r.key = obj.key;
    r.body = data;
    r.query = {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}};
    if (md5) {
        r.unsigned_payload = true;
        r.headers.push_back("Content-MD5: " + base64_of(*md5));
    }
    return r;
}

std::string part_etag(Response& resp, const Url& obj) {
    std::string etag = resp.headers["etag"];
    if (etag.empty()) throw Error("malformed response: UploadPart without an ETag", obj.str());
    return etag;
}

}  // namespace

std::string Client::upload_part(const Url& obj, const std::string& upload_id, unsigned part_number,
                                std::span<const std::byte> data) {
    Response resp = impl_->expect_ok(part_request(obj, upload_id, part_number, data, nullptr), obj.str(),
                                     ("UploadPart " + std::to_string(part_number)).c_str());
    return part_etag(resp, obj);
}

std::string Client::upload_part(const Url& obj, const std::string& upload_id, unsigned part_number,
                                std::span<const std::byte> data, const std::array<unsigned char, 16>& content_md5) {
    Response resp = impl_->expect_ok(part_request(obj, upload_id, part_number, data, &content_md5), obj.str(),
                                     ("UploadPart " + std::to_string(part_number)).c_str());
    return part_etag(resp, obj);
}

std::vector<PartInfo> Client::list_parts(const Url& obj, const std::string& upload_id) {
    std::vector<PartInfo> out;
    std::string marker;
    for (;;) {
        Request r;
        r.bucket = obj.bucket;
        r.key = obj.key;
        r.query = {{"uploadId", upload_id}};
        if (!marker.empty()) r.query.emplace_back("part-number-marker", marker);
        Response resp = impl_->expect_ok(r, obj.str(), "ListParts");
        const auto doc = store::xml::parse(resp.body, obj.str());
        if (doc.name != "ListPartsResult") throw Error("malformed response: not a ListPartsResult", obj.str());
        for (const auto* p : doc.all("Part")) {
            PartInfo part;
            const uint64_t n = parse_u64(p->text_of("PartNumber"), obj.str(), "PartNumber");
            if (n < 1 || n > 10000) throw Error("malformed response: part number out of 1..10000", obj.str());
            part.number = static_cast<unsigned>(n);
            part.etag = p->text_of("ETag");
            part.size = parse_u64(p->text_of("Size"), obj.str(), "Size");
            out.push_back(std::move(part));
        }
        if (doc.text_of("IsTruncated") != "true") return out;
        std::string next = doc.text_of("NextPartNumberMarker");
        if (next.empty() || next == marker) throw Error("malformed response: a truncated part list without its next marker", obj.str());
        marker = std::move(next);
    }
}

void Client::complete_multipart_upload(const Url& obj, const std::string& upload_id, std::span<const PartInfo> parts) {
    std::string doc = "<CompleteMultipartUpload>";
    for (const PartInfo& p : parts)
        doc += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>" + store::xml::escape(p.etag) +
               "</ETag></Part>";
    doc += "</CompleteMultipartUpload>";
    Request r;
    r.method = "POST";
    r.bucket = obj.bucket;
    r.key = obj.key;
    r.query = {{"uploadId", upload_id}};
    r.body = std::as_bytes(std::span(doc));
    r.headers.push_back("Content-Type: application/xml");
    impl_->expect_ok(r, obj.str(), "CompleteMultipartUpload");
}

void Client::abort_multipart_upload(const Url& obj, const std::string& upload_id) {
    Request r;
    r.method = "DELETE";
    r.bucket = obj.bucket;
    r.key = obj.key;
    r.query = {{"uploadId", upload_id}};
    impl_->expect_ok(r, obj.str(), "AbortMultipartUpload");
}

std::vector<UploadInfo> Client::list_multipart_uploads(const std::string& bucket, const std::string& prefix) {
    const std::string what = Url{bucket, prefix}.str();
    std::vector<UploadInfo> out;
    std::string key_marker, id_marker;
    for (;;) {
        Request r;
        r.bucket = bucket;
        r.query = {{"uploads", ""}};
        if (!prefix.empty()) r.query.emplace_back("prefix", prefix);
        if (!key_marker.empty()) r.query.emplace_back("key-marker", key_marker);
        if (!id_marker.empty()) r.query.emplace_back("upload-id-marker", id_marker);
        Response resp = impl_->expect_ok(r, what, "ListMultipartUploads");
        const auto doc = store::xml::parse(resp.body, what);
        if (doc.name != "ListMultipartUploadsResult") throw Error("malformed response: not a ListMultipartUploadsResult", what);
        for (const auto* u : doc.all("Upload"))
            out.push_back({u->text_of("Key"), u->text_of("UploadId"), u->text_of("Initiated")});
        if (doc.text_of("IsTruncated") != "true") return out;
        std::string nk = doc.text_of("NextKeyMarker"), ni = doc.text_of("NextUploadIdMarker");
        if ((nk.empty() && ni.empty()) || (nk == key_marker && ni == id_marker))
            throw Error("malformed response: a truncated upload list without its next markers", what);
        key_marker = std::move(nk);
        id_marker = std::move(ni);
    }
}

}  // namespace xendump::s3
