! ckpt_openmp.f90 STEPS DIR: gfortran with OpenMP, 4 threads: a 1-D heat equation over 200000
! points stepped by parallel loops, an integer reduction per step written to DIR/heat.log (a
! Fortran unit, flushed each step) and `step K` printed; then `DONE checksum=...` over the
! reductions. The log must be the uninterrupted run's too.
program ckpt_openmp
  use omp_lib
  use iso_c_binding, only: c_int
  implicit none
  interface
    integer(c_int) function usleep(us) bind(C, name='usleep')
      import :: c_int
      integer(c_int), value :: us
    end function
  end interface
  integer, parameter :: n = 200000
  real(8), allocatable :: u(:), v(:)
  integer :: k, i, steps
  integer(8) :: h, s
  character(len=256) :: arg, dir
  call get_command_argument(1, arg)
  read (arg, *) steps
  call get_command_argument(2, dir)
  call omp_set_num_threads(4)
  allocate (u(n), v(n))
  u = 0d0
  u(n/2) = 1d6
  open (unit=10, file=trim(dir)//'/heat.log', status='replace', action='write')
  h = 1469598103934665603_8
  do k = 1, steps
    !$omp parallel do
    do i = 2, n - 1
      v(i) = u(i) + 0.25d0*(u(i - 1) - 2d0*u(i) + u(i + 1))
    end do
    !$omp end parallel do
    u(2:n - 1) = v(2:n - 1)
    s = 0
    !$omp parallel do reduction(+:s)
    do i = 1, n
      s = s + int(u(i)*1d3, 8)
    end do
    !$omp end parallel do
    h = ieor(h, s)*1099511628211_8
    write (10, '(A,I6,I20)') 'step', k, s
    flush (10)
    print '(A,I0)', 'step ', k
    flush (6)
    i = usleep(10000_c_int)
  end do
  close (10)
  print '(A,Z16.16,A,I0)', 'DONE checksum=', h, ' steps=', steps
end program
