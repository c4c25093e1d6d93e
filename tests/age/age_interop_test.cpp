// Interoperability with the reference implementation, the age tool of
// Debian 12 (age 1.1.1): what we encrypt, `age -d` decrypts to the same
// bytes; what `age -r/-R` encrypts, our Decryptor reads. X25519 keys from
// age-keygen and from us, ssh-ed25519 keys from ssh-keygen.
#include <gtest/gtest.h>

#include "age_helpers.hpp"

namespace xendump::age {
namespace {

using namespace xendump::age::test;
using xendump::test::run;
using xendump::test::TempDir;

const std::string kAge = "/usr/bin/age", kKeygen = "/usr/bin/age-keygen", kSshKeygen = "/usr/bin/ssh-keygen";
const size_t kSizes[] = {0, 1, 65535, 65536, 65537, 5 * 1048576 + 17};

void check_run(const std::vector<std::string>& argv) {
    auto r = run(argv);
    ASSERT_EQ(r.exit_code, 0) << argv[0] << " " << argv[1] << ": " << r.err;
}

struct Interop : ::testing::Test {
    TempDir dir;
    std::filesystem::path plain = dir / "plain", enc = dir / "plain.age", back = dir / "back";

    // age-keygen's identity file and its public key.
    std::string age_keygen(const std::string& name) {
        check_run({kKeygen, "-o", (dir / name).string()});
        auto r = run({kKeygen, "-y", (dir / name).string()});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.out.substr(0, r.out.find('\n'));
    }
    // ssh-keygen's ed25519 key (no passphrase): returns its public key line.
    std::string ssh_keygen(const std::string& name) {
        check_run({kSshKeygen, "-q", "-t", "ed25519", "-N", "", "-C", "test@example", "-f", (dir / name).string()});
        std::string pub = xendump::test::slurp_text(dir / (name + ".pub"));
        return pub.substr(0, pub.find('\n'));
    }
    // We encrypt to `recipients`; `age -d -i identity` must give back the plaintext.
    void ours_to_age(const std::vector<Recipient>& recipients, const std::filesystem::path& identity) {
        for (size_t n : kSizes) {
            SCOPED_TRACE(n);
            Bytes p = random_plaintext(n, static_cast<uint32_t>(n + 1));
            write_file(enc, encrypt(recipients, p, 70000));
            std::filesystem::remove(back);
            check_run({kAge, "-d", "-i", identity.string(), "-o", back.string(), enc.string()});
            EXPECT_TRUE(read_file(back) == p);
        }
    }
    // age encrypts with `args` (-r … / -R …); our reader with `ids` must give back the plaintext.
    void age_to_ours(const std::vector<std::string>& args, const std::vector<Identity>& ids) {
        for (size_t n : kSizes) {
            SCOPED_TRACE(n);
            Bytes p = random_plaintext(n, static_cast<uint32_t>(n + 2));
            write_file(plain, p);
            std::filesystem::remove(enc);
            std::vector<std::string> argv{kAge, "-e"};
            argv.insert(argv.end(), args.begin(), args.end());
            argv.insert(argv.end(), {"-o", enc.string(), plain.string()});
            check_run(argv);
            EXPECT_TRUE(decrypt_file(enc, ids) == p);
        }
    }
};

TEST_F(Interop, X25519KeysOfAgeKeygenBothWays) {
    std::string pub = age_keygen("key");
    auto ids = read_identities_file(dir / "key", false);
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(ids[0].recipient().to_string(), pub);  // the same public key as age-keygen -y
    ours_to_age({Recipient::parse(pub)}, dir / "key");
    age_to_ours({"-r", pub}, ids);
}

TEST_F(Interop, OurIdentityWorksWithAge) {
    Identity id = Identity::generate();
    write_text(dir / "ours", "# ours\n" + id.to_string() + "\n");
    ours_to_age({id.recipient()}, dir / "ours");
    age_to_ours({"-r", id.recipient().to_string()}, {id});
}

TEST_F(Interop, SshEd25519KeysOfSshKeygenBothWays) {
    std::string pub = ssh_keygen("id_ed25519");
    auto ids = read_identities_file(dir / "id_ed25519", false);
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(ids[0].kind(), Identity::Kind::ssh_ed25519);
    ours_to_age({Recipient::parse(pub)}, dir / "id_ed25519");
    age_to_ours({"-R", (dir / "id_ed25519.pub").string()}, ids);
    age_to_ours({"-r", pub}, ids);
}

TEST_F(Interop, RecipientsFileOfBothTypesAsAgeReadsIt) {
    std::string x = age_keygen("key"), ssh = ssh_keygen("id_ed25519");
    write_text(dir / "recipients", "# the on-call team\n" + x + "\n\n# laptop\n" + ssh + "\n");
    auto recipients = read_recipients_file(dir / "recipients");
    ASSERT_EQ(recipients.size(), 2u);
    // Both of our readers' identities open what age encrypted to the file,
    // and age opens with either key what we encrypted to it.
    age_to_ours({"-R", (dir / "recipients").string()}, read_identities_file(dir / "key", false));
    age_to_ours({"-R", (dir / "recipients").string()}, read_identities_file(dir / "id_ed25519", false));
    ours_to_age(recipients, dir / "key");
    ours_to_age(recipients, dir / "id_ed25519");
}

TEST_F(Interop, AgeRefusesOurFileTamperedAndSoDoWe) {
    std::string pub = age_keygen("key");
    Bytes p = random_plaintext(3 * kChunkSize, 9);
    Bytes data = encrypt(std::vector<Recipient>{Recipient::parse(pub)}, p);
    data[data.size() - kChunkSize] ^= 1;  // inside chunk 2 (the last)
    write_file(enc, data);
    auto r = run({kAge, "-d", "-i", (dir / "key").string(), "-o", back.string(), enc.string()});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_THROW(decrypt_file(enc, read_identities_file(dir / "key", false)), Error);
}

}  // namespace
}  // namespace xendump::age
