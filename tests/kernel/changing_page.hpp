// A page that a running guest changes while dom0 reads it, deterministically:
// the page is kept PROT_NONE, so every instruction that reads it faults; the
// fault handler lets that one instruction through (the page readable, the
// trap flag set) and the single-step trap after it protects the page again.
// After `flip_after` such reads the page's bytes become `after`: sweeping
// flip_after over every read a function makes puts the guest's write
// between each pair of its reads. x86-64 Linux only (supported()).
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>

namespace xendump::test {

class ChangingPage {
public:
    static constexpr size_t kSize = 4096;

    static constexpr bool supported() {
#if defined(__x86_64__) && defined(__linux__)
        return true;
#else
        return false;
#endif
    }

    // `before` and `after` are kSize bytes each.
    ChangingPage(std::span<const std::byte> before, std::span<const std::byte> after, uint64_t flip_after)
        : after_(after), flip_after_(flip_after) {
        if (before.size() != kSize || after.size() != kSize) throw std::invalid_argument("ChangingPage: page size");
        void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::runtime_error("ChangingPage: mmap");
        page_ = static_cast<std::byte*>(p);
        std::memcpy(page_, before.data(), kSize);
        struct sigaction sa {};
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sa.sa_sigaction = &on_fault;
        ::sigaction(SIGSEGV, &sa, &old_segv_);
        sa.sa_sigaction = &on_step;
        ::sigaction(SIGTRAP, &sa, &old_trap_);
        active_ = this;
        ::mprotect(page_, kSize, PROT_NONE);
    }
    ~ChangingPage() {
        active_ = nullptr;
        ::sigaction(SIGSEGV, &old_segv_, nullptr);
        ::sigaction(SIGTRAP, &old_trap_, nullptr);
        ::munmap(page_, kSize);
    }
    ChangingPage(const ChangingPage&) = delete;
    ChangingPage& operator=(const ChangingPage&) = delete;

    std::span<const std::byte> bytes() const { return {page_, kSize}; }
    uint64_t reads() const { return reads_; }  // instructions that read the page so far
    bool flipped() const { return flipped_; }

private:
#if defined(__x86_64__) && defined(__linux__)
    static constexpr greg_t kTrapFlag = 0x100;

    static void on_fault(int, siginfo_t* si, void* context) {
        ChangingPage* self = active_;
        auto* at = static_cast<std::byte*>(si->si_addr);
        if (self == nullptr || at < self->page_ || at >= self->page_ + kSize) {
            ::signal(SIGSEGV, SIG_DFL);  // a real fault: crash on the way back
            return;
        }
        if (++self->reads_ > self->flip_after_ && !self->flipped_) {
            ::mprotect(self->page_, kSize, PROT_READ | PROT_WRITE);
            std::memcpy(self->page_, self->after_.data(), kSize);
            self->flipped_ = true;
        }
        ::mprotect(self->page_, kSize, PROT_READ);
        static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_EFL] |= kTrapFlag;
    }
    static void on_step(int, siginfo_t*, void* context) {
        if (ChangingPage* self = active_) ::mprotect(self->page_, kSize, PROT_NONE);
        static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
    }
#else
    static void on_fault(int, siginfo_t*, void*) { ::signal(SIGSEGV, SIG_DFL); }
    static void on_step(int, siginfo_t*, void*) {}
#endif

    static inline ChangingPage* active_ = nullptr;
    std::byte* page_ = nullptr;
    std::span<const std::byte> after_;
    uint64_t flip_after_;
    uint64_t reads_ = 0;
    bool flipped_ = false;
    struct sigaction old_segv_ {}, old_trap_ {};
};

}  // namespace xendump::test
