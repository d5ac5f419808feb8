import { useRef, useState } from 'react'
import { PanResponder, Pressable, StyleSheet, Text, View, type LayoutChangeEvent } from 'react-native'
import { signatureDataUrl, type Stroke } from './signature.js'

/**
 * A signature pad for `pickup`, `handoff` and `return`: the finger's strokes become an SVG data
 * URL (signatureDataUrl) handed to `onSigned`, which queues the action with that `signature`.
 * Drawn with plain Views (a dot per point) so the skeleton needs no drawing library; an app may
 * swap in react-native-svg for smoother lines without changing what is sent.
 */
export function HandoffSignature({ title, onSigned }: { title: string; onSigned: (signature: string) => void }) {
  const [strokes, setStrokes] = useState<{ x: number; y: number }[][]>([])
  const size = useRef({ width: 300, height: 150 })
  const pan = useRef(
    PanResponder.create({
      onStartShouldSetPanResponder: () => true,
      onPanResponderGrant: (e) => setStrokes((s) => [...s, [{ x: e.nativeEvent.locationX, y: e.nativeEvent.locationY }]]),
      onPanResponderMove: (e) =>
        setStrokes((s) => [...s.slice(0, -1), [...(s[s.length - 1] ?? []), { x: e.nativeEvent.locationX, y: e.nativeEvent.locationY }]]),
    }),
  ).current
  const onLayout = (e: LayoutChangeEvent) => {
    size.current = { width: e.nativeEvent.layout.width, height: e.nativeEvent.layout.height }
  }
  const empty = strokes.length === 0
  return (
    <View>
      <Text style={styles.title}>{title}</Text>
      <View
        style={styles.pad}
        onLayout={onLayout}
        {...pan.panHandlers}
        accessibilityLabel="Signature pad"
        accessibilityHint="Sign with your finger"
      >
        {strokes.flatMap((s: Stroke, i) =>
          s.map((p, j) => <View key={`${i}-${j}`} style={[styles.dot, { left: p.x - 1.5, top: p.y - 1.5 }]} />),
        )}
      </View>
      <View style={styles.buttons}>
        <Pressable accessibilityRole="button" onPress={() => setStrokes([])} style={styles.button}>
          <Text>Clear</Text>
        </Pressable>
        <Pressable
          accessibilityRole="button"
          accessibilityState={{ disabled: empty }}
          disabled={empty}
          style={[styles.button, styles.primary]}
          onPress={() => onSigned(signatureDataUrl(strokes, Math.round(size.current.width), Math.round(size.current.height)))}
        >
          <Text style={styles.primaryText}>Confirm signature</Text>
        </Pressable>
      </View>
    </View>
  )
}

const styles = StyleSheet.create({
  title: { fontSize: 16, fontWeight: '600', marginBottom: 8 },
  pad: { height: 150, borderWidth: 1, borderColor: '#90a4ae', borderRadius: 8, backgroundColor: '#fafafa', overflow: 'hidden' },
  dot: { position: 'absolute', width: 3, height: 3, borderRadius: 1.5, backgroundColor: '#000' },
  buttons: { flexDirection: 'row', justifyContent: 'flex-end', marginTop: 8, gap: 8 },
  button: { paddingHorizontal: 16, paddingVertical: 10, borderRadius: 6, backgroundColor: '#eceff1' },
  primary: { backgroundColor: '#0a7d5a' },
  primaryText: { color: '#fff', fontWeight: '600' },
})
