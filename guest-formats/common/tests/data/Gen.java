import java.util.*;
public class Gen {
  public static void main(String[] a) {
    Random r = new Random(42);
    StringBuilder sb = new StringBuilder();
    int n = Integer.parseInt(a[0]);
    for (int i = 0; i < n; i++) {
      long bits;
      switch (i % 4) {
        case 0: bits = r.nextLong(); break;
        case 1: bits = Double.doubleToLongBits(r.nextInt(2000000) / Math.pow(10, r.nextInt(12))); break;
        case 2: bits = Double.doubleToLongBits(Math.scalb(1.0 + r.nextInt(1<<20) / (double)(1<<20), r.nextInt(2100) - 1075)); break;
        default: bits = r.nextLong() & 0x800FFFFFFFFFFFFFL | ((long)(r.nextInt(80) + (r.nextBoolean()? 0 : 1990)) << 52); break;
      }
      double d = Double.longBitsToDouble(bits);
      if (Double.isNaN(d)) continue;
      sb.append('d').append(' ').append(Long.toHexString(bits)).append(' ').append(Double.toString(d)).append('\n');
      int fb;
      switch (i % 4) {
        case 0: fb = r.nextInt(); break;
        case 1: fb = Float.floatToIntBits(r.nextInt(2000000) / (float)Math.pow(10, r.nextInt(9))); break;
        case 2: fb = Float.floatToIntBits(Math.scalb(1.0f + r.nextInt(1<<12) / (float)(1<<12), r.nextInt(280) - 150)); break;
        default: fb = r.nextInt() & 0x807FFFFF | ((r.nextInt(40) + (r.nextBoolean()? 0 : 200)) << 23); break;
      }
      float f = Float.intBitsToFloat(fb);
      if (Float.isNaN(f)) continue;
      sb.append('f').append(' ').append(Integer.toHexString(fb)).append(' ').append(Float.toString(f)).append('\n');
    }
    for (long v : new long[]{1, 2, 3, 1L<<53, (1L<<53)+2, (1L<<60)+4096, 123456789012345680L, 1000000, 10000000, 100000000}) {
      double d = v;
      sb.append("d ").append(Long.toHexString(Double.doubleToLongBits(d))).append(' ').append(Double.toString(d)).append('\n');
      float f = v;
      sb.append("f ").append(Integer.toHexString(Float.floatToIntBits(f))).append(' ').append(Float.toString(f)).append('\n');
    }
    float[] fs = {Float.MIN_VALUE, Float.MIN_NORMAL, Float.MAX_VALUE, 0.1f, 1.17549435E-38f, 3.4028235E38f, 1.0E10f, 0.001f, 1.0E-4f, 9999999f, 1.0E7f};
    for (float f : fs) sb.append("f ").append(Integer.toHexString(Float.floatToIntBits(f))).append(' ').append(Float.toString(f)).append('\n');
    double[] ds = {Double.MIN_VALUE, Double.MIN_NORMAL, Double.MAX_VALUE, 0.1, 0.3, 0.1+0.2, 1e23, 2e-3, 1e-3, 1e7, 9999999.999, 2.0E-3, 8.41E21, 5e-324, 1.0E-5};
    for (double d : ds) sb.append("d ").append(Long.toHexString(Double.doubleToLongBits(d))).append(' ').append(Double.toString(d)).append('\n');
    System.out.print(sb);
  }
}
