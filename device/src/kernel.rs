//! One declaration per kernel: [`kernels!`](crate::kernels) turns each
//! kernel written in it into the PTX entry point (on nvptx64), a typed
//! host-side [`Kernel`] handle (everywhere) and the module's list of entry
//! names, `KERNELS`; [`kernel_list!`](crate::kernel_list) joins such lists
//! into the crate's one list and refuses, at compile time, two kernels with
//! one entry name.
use core::marker::PhantomData;

/// A kernel's host-side handle: its PTX entry name, the kernel crate that
/// declares it (its *image*: the PTX and cubins built from that crate), and
/// its parameter types `P` (a tuple) so that a launcher can refuse, at
/// compile time, arguments of the wrong number or types.
///
/// A handle launches only the kernel of its own image: a module built from
/// another crate is refused even when it has an entry point of the same
/// name (an op declared in a host program, where nothing builds it to PTX,
/// would otherwise run a built-in kernel of its name).
///
/// On the host, a handle made by [`kernels!`](crate::kernels) (or
/// [`kernel_handle!`](crate::kernel_handle)) also carries the kernel body
/// compiled for the host, which the simulator runs
/// (`sim_entry`).
pub struct Kernel<P> {
    name: &'static str,
    image: &'static str,
    #[cfg(not(target_arch = "nvptx64"))]
    sim_entry: Option<crate::sim::Entry>,
    _params: PhantomData<fn(P)>,
}

impl<P> Kernel<P> {
    /// The handle of the entry point `name` of the kernel crate `image` (its
    /// library name, `CARGO_CRATE_NAME`) with the parameters `P`, without a
    /// host entry (the simulator cannot run it). Prefer
    /// [`kernel_handle!`](crate::kernel_handle), which names the declaring
    /// crate itself and adds the host entry.
    ///
    /// # Safety
    /// The entry point `name` of `image` takes parameters of exactly the
    /// types `P`, in order: the launch passes arguments of those types and
    /// the kernel reads its own (what [`kernels!`](crate::kernels) and the
    /// family macros guarantee by making the entry point and the handle
    /// from one declaration).
    pub const unsafe fn new(image: &'static str, name: &'static str) -> Self {
        Self {
            name,
            image,
            #[cfg(not(target_arch = "nvptx64"))]
            sim_entry: None,
            _params: PhantomData,
        }
    }

    /// The handle of the entry point `name` of the kernel crate `image`
    /// whose body, compiled for the host, is `entry` (reading parameters of
    /// the types `P`, in order).
    ///
    /// # Safety
    /// As [`Kernel::new`], and `entry` reads parameters of the types `P`,
    /// in order.
    #[cfg(not(target_arch = "nvptx64"))]
    pub const unsafe fn with_sim_entry(
        image: &'static str,
        name: &'static str,
        entry: crate::sim::Entry,
    ) -> Self {
        Self {
            name,
            image,
            sim_entry: Some(entry),
            _params: PhantomData,
        }
    }

    /// The kernel body compiled for the host, for
    /// [`sim::launch`](crate::sim::launch); `None` for a handle made by
    /// [`Kernel::new`].
    #[cfg(not(target_arch = "nvptx64"))]
    pub const fn sim_entry(&self) -> Option<crate::sim::Entry> {
        self.sim_entry
    }

    /// The PTX entry point's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The kernel crate that declares the kernel (its library name), whose
    /// image alone the handle launches on.
    pub const fn image(&self) -> &'static str {
        self.image
    }
}

impl<P> Clone for Kernel<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Kernel<P> {}

/// Two handles are equal when they name the same entry point of the same
/// kernel crate.
impl<P> PartialEq for Kernel<P> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.image == other.image
    }
}

impl<P> Eq for Kernel<P> {}

/// The entry point's name.
impl<P> core::fmt::Display for Kernel<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

impl<P> core::fmt::Debug for Kernel<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Kernel({}::{})", self.image, self.name)
    }
}

/// Asks for a register limit of `N` a thread for the entry point whose body
/// calls it (inlined into it): PTX's `.maxnreg N`, which belongs in the
/// entry's header, where Rust code cannot write, so this writes the comment
/// `// cuda-kernels .maxnreg N` into the body and the builder
/// (`cuda-kernels-builder`) moves it into the header. A kernel that moves
/// registers between its warpgroups with `setmaxnreg` needs one (`ptxas`
/// honours `setmaxnreg` only where it knows the count at launch); other
/// kernels of the same image keep what `ptxas` gives them. Nothing on the
/// host.
#[inline(always)]
pub fn max_registers<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a comment: no instruction.
    unsafe {
        core::arch::asm!("// cuda-kernels .maxnreg {n}", n = const N, options(nomem, nostack))
    }
}

/// Declares kernels once. Each
/// ```text
/// kernels! {
///     /// docs, with a `# Safety` section
///     pub fn multiply(a: *const f32, b: *const f32, c: *mut f32, n: usize) as MULTIPLY {
///         body
///     }
///     …
/// }
/// ```
/// gives, on nvptx64, the entry point `#[unsafe(no_mangle)] pub unsafe
/// extern "ptx-kernel" fn multiply(…)` with these docs and body; everywhere,
/// the handle `pub const MULTIPLY: Kernel<(*const f32, *const f32, *mut f32,
/// usize)>`; and once per invocation `KERNELS: &[&str]`, the entry names in
/// declaration order (join the modules' lists with
/// [`kernel_list!`](crate::kernel_list)); `kernels! { list NAME; … }` names
/// that list `NAME` instead.
///
/// Several blocks may share a module: each one's `KERNELS` is re-exported
/// from a hidden module of its own, so they only clash where `KERNELS` is
/// named (rustc: "`KERNELS` is ambiguous"); to join such lists, give each
/// block a `list NAME;`:
/// ```
/// mod k {
///     use cuda_kernels_device::thread;
///     cuda_kernels_device::kernels! {
///         /// `x[i] = 1` for `i < n`.
///         ///
///         /// # Safety
///         /// `x` holds `n` u32.
///         pub fn ones(x: *mut u32, n: usize) as ONES {
///             for i in thread::grid_stride(n) {
///                 // SAFETY: i < n.
///                 unsafe { *x.add(i) = 1 };
///             }
///         }
///     }
///     cuda_kernels_device::kernels! {
///         /// `x[i] = 0` for `i < n`.
///         ///
///         /// # Safety
///         /// `x` holds `n` u32.
///         pub fn zeros(x: *mut u32, n: usize) as ZEROS {
///             for i in thread::grid_stride(n) {
///                 // SAFETY: i < n.
///                 unsafe { *x.add(i) = 0 };
///             }
///         }
///     }
/// }
/// assert_eq!((k::ONES.name(), k::ZEROS.name()), ("ones", "zeros"));
/// ```
/// A kernel written otherwise (here without `as HANDLE`) is one error,
/// "kernels!: each kernel is `/// docs` then `pub fn name(arg: Type, …) as
/// HANDLE { body }`":
/// ```compile_fail
/// cuda_kernels_device::kernels! {
///     pub fn no_handle(x: *mut f32) {}
/// }
/// ```
///
/// On the host, the body is compiled too, as the handle's host entry
/// (`Kernel::sim_entry`) that the simulator runs; it may use the items of
/// the enclosing module. On nvptx64 nothing of it is emitted.
#[macro_export]
macro_rules! kernels {
    (@emit [$($list:tt)*] $(
        $(#[$attr:meta])*
        pub fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) as $handle:ident $body:block
    )*) => {
        $(
            $(#[$attr])*
            #[cfg(target_arch = "nvptx64")]
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name($($arg: $ty),*) $body

            #[doc = concat!(
                "The handle of the entry point `", stringify!($name),
                "`: its name and parameters `(", stringify!($($ty),*), ")`."
            )]
            pub const $handle: $crate::kernel::Kernel<($($ty,)*)> =
                $crate::kernel_handle!($name($($arg: $ty),*) $body);
        )*
        $crate::kernels! { @list [$($list)*] $($name)* }
    };
    (@emit $($malformed:tt)*) => {
        ::core::compile_error!(
            "kernels!: each kernel is `/// docs` then `pub fn name(arg: Type, …) as HANDLE { body }`"
        );
    };
    (@list [const $list:ident] $($name:ident)*) => {
        /// The PTX entry points this invocation declares, in declaration order.
        pub const $list: &[&str] = &[$(stringify!($name)),*];
    };
    // Without `list NAME;`: the list is `KERNELS`, in a hidden module named
    // after the first kernel and glob re-exported, so that several blocks in
    // one module compile (their `KERNELS` only clash where one is named:
    // rustc then says it is ambiguous; give each block a `list NAME;`).
    (@list [glob]) => {};
    (@list [glob] $first:ident $($name:ident)*) => {
        #[doc(hidden)]
        pub mod $first {
            /// The PTX entry points this invocation declares, in declaration order.
            pub const KERNELS: &[&str] = &[stringify!($first) $(, stringify!($name))*];
        }
        #[allow(ambiguous_glob_reexports)]
        pub use self::$first::*;
    };
    (list $list:ident; $($kernels:tt)*) => {
        $crate::kernels! { @emit [const $list] $($kernels)* }
    };
    ($($kernels:tt)*) => {
        $crate::kernels! { @emit [glob] $($kernels)* }
    };
}

/// The [`Kernel`] handle of the entry point `name` with these parameters,
/// as a constant expression: `kernel_handle!(name(a: *const f32, n: usize) {
/// body })`, bound to the crate it is written in (`CARGO_CRATE_NAME`: the
/// kernel crate whose image holds the entry point; in a crate that builds
/// no PTX the handle's launches are `KernelNotFound`, saying where kernels
/// must live). On nvptx64 it is `Kernel::new(crate, "name")` (the entry point itself
/// is declared separately, from the same tokens); on the host it also
/// carries `body` compiled as the simulator's entry
/// (`Kernel::with_sim_entry`), which reads parameter `i` from
/// `*(params.add(i) as *const *const T)`, the `cuLaunchKernel` layout. The
/// body may use the items of the enclosing module. For kernel families'
/// macros; [`kernels!`](crate::kernels) uses it.
///
/// Its caller promises that the entry point it declares next to the handle
/// has these parameters (the family macros make both from one declaration).
///
/// `kernel_handle!(entry => name(…) { body })` names the entry point with
/// the expression `entry` (a `&'static str`, e.g. a `concat!`) instead,
/// for families whose entry names are built from several tokens
/// (`elementwise_sum_f32`); `name` is then only the host function's name.
#[macro_export]
macro_rules! kernel_handle {
    ($name:ident ( $($arg:ident : $ty:ty),* $(,)? ) $body:block) => {
        $crate::kernel_handle!(stringify!($name) => $name($($arg: $ty),*) $body)
    };
    ($entry:expr => $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) $body:block) => {{
        let entry: &'static str = $entry;
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the entry point is declared from the same tokens as
        // these parameter types (the caller of this macro's contract).
        let handle = unsafe { $crate::kernel::Kernel::new(::core::env!("CARGO_CRATE_NAME"), entry) };
        #[cfg(not(target_arch = "nvptx64"))]
        let sim_entry: $crate::sim::Entry = {
            /// The kernel body on the host: the simulator's entry.
            ///
            /// # Safety
            /// `params` holds a pointer to each parameter value, in order.
            #[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
            unsafe fn $name(params: *const *mut ::core::ffi::c_void) {
                const N: usize = <[&str]>::len(&[$(stringify!($arg)),*]);
                // SAFETY: the launch passes N parameter pointers.
                let params = unsafe { ::core::slice::from_raw_parts(params, N) };
                #[allow(unused_mut, unused_variables)]
                let mut params = params.iter();
                // The kernel crate's own profile: a dev build runs it slowly.
                if cfg!(debug_assertions) {
                    $crate::sim::warn_unoptimised(env!("CARGO_PKG_NAME"));
                }
                $(
                    // SAFETY: the launch passes a pointer to a value of the
                    // parameter's type (the handle's parameter types).
                    let $arg: $ty = unsafe {
                        params.next().unwrap_unchecked().cast::<$ty>().read()
                    };
                )*
                // The parameters' names, for an out-of-bounds report.
                if $crate::sim::first_thread() {
                    #[allow(unused_imports)]
                    use $crate::sim::{ParamPointer as _, ParamValue as _};
                    $crate::sim::note_params(&[$(
                        (stringify!($arg), (&&$crate::sim::ParamProbe(&$arg)).param_address())
                    ),*]);
                }
                $body
            }
            $name
        };
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: the entry point and `sim_entry` are declared from the same
        // tokens as these parameter types (the caller of this macro's
        // contract); `sim_entry` reads them in order.
        let handle = unsafe {
            $crate::kernel::Kernel::with_sim_entry(::core::env!("CARGO_CRATE_NAME"), entry, sim_entry)
        };
        handle
    }};
}

/// Joins kernel lists (each a `const` `&[&str]`) into one `&'static [&str]`
/// at compile time, and fails the build when an entry name appears twice:
/// ```compile_fail
/// mod a { pub const KERNELS: &[&str] = &["scale"]; }
/// mod b { pub const KERNELS: &[&str] = &["scale"]; }
/// const ALL: &[&str] = cuda_kernels_device::kernel_list!(a::KERNELS, b::KERNELS);
/// ```
#[macro_export]
macro_rules! kernel_list {
    ($($list:expr),* $(,)?) => {{
        const LISTS: &[&[&str]] = &[$($list),*];
        const N: usize = $crate::kernel::total_len(LISTS);
        const ALL: [&str; N] = $crate::kernel::concat::<N>(LISTS);
        // A second kernel under an existing entry name fails here, the
        // panic message being that name.
        const TWO_KERNELS_SHARE_THE_ENTRY_NAME: () =
            if let Some(name) = $crate::kernel::first_duplicate(&ALL) {
                panic!("{}", name)
            };
        #[allow(clippy::let_unit_value)]
        let () = TWO_KERNELS_SHARE_THE_ENTRY_NAME;
        &ALL
    }};
}

/// The total length of `lists` (for [`kernel_list!`](crate::kernel_list)).
pub const fn total_len(lists: &[&[&str]]) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < lists.len() {
        n += lists[i].len();
        i += 1;
    }
    n
}

/// `lists` end to end; `N` is their [`total_len`].
pub const fn concat<const N: usize>(lists: &[&[&'static str]]) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut k) = (0, 0);
    while i < lists.len() {
        let mut j = 0;
        while j < lists[i].len() {
            out[k] = lists[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

/// The first name of `names` that appears again later, if any.
pub const fn first_duplicate<'a>(names: &[&'a str]) -> Option<&'a str> {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if str_eq(names[i], names[j]) {
                return Some(names[i]);
            }
            j += 1;
        }
        i += 1;
    }
    None
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
